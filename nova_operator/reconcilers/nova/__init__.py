"""The Nova controller: wiring (``controller``), the pass (``reconciler``), the pipeline as data
(``steps``), the pass context (``context``) and one module per step. ``nova_operator.controllers``
registers ``controller.make_controller_factory``.
"""
