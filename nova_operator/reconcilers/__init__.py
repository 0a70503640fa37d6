"""The two controllers' passes: ``nova/`` and ``compute/``, each a package of the same shape.

Each holds its controller wiring (``controller.py``: informers, indexes, watches), its pass
(``reconciler.py``), its pipeline as data (``steps.py``), its pass context (``context.py``) and one
module per step. What both share sits here: the status finish and write (``status``), finalizers,
the exactly-once Job claims, the PriorityClass check, and the step and per-Nova metrics.
"""
