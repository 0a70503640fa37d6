"""The single registration point for the operator's controllers.

``factories(settings)`` returns the controller factories the CLI hands to the manager.
Each factory takes the ``Manager``, asks it for the informers it needs and returns its
``Controller`` (or an awaitable of it, when it must ask the cluster something first).
"""

from __future__ import annotations

from dataclasses import replace

from nova_operator.reconcilers.compute.context import ComputeSettings
from nova_operator.reconcilers.compute.controller import factory_with as novacompute_factory
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.reconcilers.nova.controller import make_controller_factory, probe_namespaces, probe_options
from nova_operator.runtime import Controller
from nova_operator.runtime.manager import AsyncControllerFactory, ControllerFactory, Manager
from nova_operator.settings import Settings


def with_settings(options: NovaOptions, settings: Settings) -> NovaOptions:
    """The probed options plus what the command line decides (API URL, namespace scope)."""
    return replace(
        options,
        nova_api_url=settings.openstack.nova_api_url_for,
        namespaced=bool(settings.watch.namespaces),
        secret_refs=settings.secret_refs,
        pass_budget=settings.queue.pass_budget,
    )


def factories(settings: Settings | None = None) -> list[ControllerFactory | AsyncControllerFactory]:
    settings = settings or Settings()
    operator_namespace = settings.operator_namespace  # the NetworkPolicies' allowed source

    async def nova(manager: Manager) -> Controller:
        # Whether the Gateway API and MariaDB kinds are served decides which informers can sync.
        options = await probe_options(manager.kube, operator_namespace=operator_namespace)
        options = with_settings(options, settings)
        # --namespace: whether RabbitmqClusters can be watched is asked of each watched namespace
        options = await probe_namespaces(manager.kube, options, settings.watch.namespaces)
        return make_controller_factory(options)(manager)

    return [nova, novacompute_factory(compute_settings(settings))]


def compute_settings(settings: Settings) -> ComputeSettings:
    """What the command line decides for the NovaCompute controller."""
    return ComputeSettings(
        nova_api_url=settings.openstack.nova_api_url_for,
        default_pull_policy=settings.default_image_pull_policy,
        secret_refs=settings.secret_refs,
        pass_budget=settings.queue.pass_budget,
    )
