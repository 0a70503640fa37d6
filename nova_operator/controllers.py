"""The single registration point for the operator's controllers.

``factories(settings)`` returns the controller factories the CLI hands to the manager.
Each factory takes the ``Manager``, asks it for the informers it needs and returns its
``Controller``.
"""

from __future__ import annotations

from nova_operator.manager import ControllerFactory
from nova_operator.reconcilers.compute.context import ComputeSettings
from nova_operator.reconcilers.compute.controller import factory_with as novacompute_factory
from nova_operator.settings import Settings


def factories(settings: Settings | None = None) -> list[ControllerFactory]:
    settings = settings or Settings()
    compute = ComputeSettings(nova_api_url=settings.openstack.nova_api_url_for)
    return [novacompute_factory(compute)]
