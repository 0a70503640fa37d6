"""The single registration point for the operator's controllers.

``factories()`` returns the controller factories the CLI hands to the manager. Each
factory takes the ``Manager``, asks it for the informers it needs and returns its
``Controller``. The Nova and NovaCompute controllers are added here when they exist.
"""

from __future__ import annotations

from nova_operator.manager import ControllerFactory


def factories() -> list[ControllerFactory]:
    return []
