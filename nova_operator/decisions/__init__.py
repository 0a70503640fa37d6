"""Pure decisions: what to do, computed from what was read.

Every module here is a function of its inputs: no API access, no HTTP, no clock (a caller passes
``now``), no logging of its own. The reconcilers read, call a decision, and act on it.
"""
