"""The NovaCompute controller: wiring (``controller``), the pass (``reconciler``), the pipeline as data
(``steps``), the pass context (``context``) and one module per step. ``nova_operator.controllers``
registers ``controller.controller_factory``.
"""
