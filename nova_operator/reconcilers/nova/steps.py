"""The Nova pipeline as data (reconciler.md §3): the thirteen ordered steps, then the concurrent group.

Several steps report through one condition on purpose (the DSN, transport-URL and config
steps produce inputs of the same graph as the Secrets step, so they mark ``SecretsReady``);
the ``sub_reconciler`` metric label, the step name, tells them apart.

    NetworkPolicy -> Secrets -> DBConnectionSecrets -> TransportURLSecret -> Config
      -> ComputeConfig -> Database -> Conductor -> Scheduler -> Metadata -> ConsoleProxy
      -> Deployment -> DBArchive -> [ HTTPRoute | MetadataHTTPRoute | ConsoleHTTPRoute
                                      | HealthCheck | HPA | ServiceRecords ]

The NetworkPolicy runs first (not in the group, as reconciler.md has it): a requested policy
must exist before the db-sync Job's pod, and nothing that fails later may leave a Nova that
asked for one running without it (issue 13).
"""

from __future__ import annotations

from functools import partial
from typing import Final

from nova_operator import conditions as c
from nova_operator.pipeline import Step
from nova_operator.reconcilers.nova import (
    compute_config,
    config,
    database,
    db_archive,
    db_connection_secrets,
    deployment,
    health_check,
    hpa,
    http_route,
    network_policy,
    secrets,
    service_records,
    transport_url_secret,
    upgrade,
    workloads,
)
from nova_operator.reconcilers.nova.context import PassContext

NovaStep = Step[PassContext]
WORKLOADS: Final = "workloads"


def workloads_at_once(ctx: PassContext, batch: str) -> bool:
    """The five workload steps run at once except during an upgrade, whose roll order they are.

    They hand nothing to each other and, outside ``RollingUpdate``, only the API step stops the
    pipeline (a missing PriorityClass aside), so their conditions and the pass's result are
    those of the specified order (``pipeline.run_sequence``); a pass that ends at one of them may
    have applied the Deployments after it already, which the next pass would do anyway.
    During any upgrade phase they keep the order conductor, scheduler, metadata, console proxy, API.
    """
    return batch == WORKLOADS and not ctx.status.get("upgradePhase")


NOVA_STEPS: Final[tuple[NovaStep, ...]] = (
    # First (issue 13): a requested policy exists before any step creates a pod, and no failure of
    # a later step skips it; a refused policy stops the pass (fail closed).
    Step("NetworkPolicy", c.NETWORK_POLICY_READY, network_policy.reconcile_network_policy),
    Step("Secrets", c.SECRETS_READY, secrets.reconcile_secrets),
    Step("DBConnectionSecrets", c.SECRETS_READY, db_connection_secrets.reconcile_db_connection_secrets),
    Step("TransportURLSecret", c.SECRETS_READY, transport_url_secret.reconcile_transport_url_secret),
    Step("Config", c.SECRETS_READY, config.reconcile_config),
    Step("ComputeConfig", c.COMPUTE_CONFIG_READY, compute_config.reconcile_compute_config),
    Step(
        "Database", c.DATABASE_READY, partial(database.reconcile_database, upgrade_flow=upgrade.run_upgrade)
    ),
    # The five workloads: one batch, at once outside an upgrade (``workloads_at_once``).
    Step(
        "Conductor", c.CONDUCTOR_READY, workloads.reconcile_conductor, on_refusal="continue", batch=WORKLOADS
    ),
    Step(
        "Scheduler", c.SCHEDULER_READY, workloads.reconcile_scheduler, on_refusal="continue", batch=WORKLOADS
    ),
    Step("Metadata", c.METADATA_READY, workloads.reconcile_metadata, on_refusal="continue", batch=WORKLOADS),
    Step(
        "ConsoleProxy",
        c.CONSOLE_PROXY_READY,
        workloads.reconcile_console_proxy,
        on_refusal="continue",
        batch=WORKLOADS,
    ),
    Step(
        "Deployment",
        c.DEPLOYMENT_READY,
        deployment.reconcile_deployment,
        on_refusal="continue",
        batch=WORKLOADS,
    ),
    Step("DBArchive", c.DB_ARCHIVE_READY, db_archive.reconcile_db_archive, on_refusal="continue"),
)

NOVA_GROUP: Final[tuple[NovaStep, ...]] = (
    Step("HTTPRoute", c.HTTP_ROUTE_READY, http_route.reconcile_http_route),
    Step("MetadataHTTPRoute", c.METADATA_HTTP_ROUTE_READY, http_route.reconcile_metadata_http_route),
    Step("ConsoleHTTPRoute", c.CONSOLE_HTTP_ROUTE_READY, http_route.reconcile_console_http_route),
    Step("HealthCheck", c.NOVA_API_READY, health_check.reconcile_health_check),
    Step("HPA", c.HPA_READY, hpa.reconcile_hpa),
    Step("ServiceRecords", c.SERVICE_RECORDS_HEALTHY, service_records.reconcile_service_records),
)

CONDITION_TYPES: Final[dict[str, str]] = {s.name: s.condition for s in (*NOVA_STEPS, *NOVA_GROUP)}
"""``sub_reconciler`` -> ``condition_type`` of the step metrics (§14.1), pre-created at 0."""
