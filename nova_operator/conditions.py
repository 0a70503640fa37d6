"""Status conditions in the metav1.Condition shape, kept as plain dicts.

Messages are cut to the CRD's bound (``bounded_message``). Upsert semantics follow
``meta.SetStatusCondition``: ``lastTransitionTime`` changes only when the status flips, so a
pass that re-asserts what is already true leaves the condition byte-identical and the status
write is skipped (reconciler.md §8.3, §8.4). The caller passes the clock (``now``) so the
functions stay pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableSequence
from datetime import datetime
from typing import Any, Final, Literal

from nova_operator.models.meta import CONDITION_MESSAGE_MAX
from nova_operator.timestamps import rfc3339

Condition = dict[str, Any]
Status = Literal["True", "False", "Unknown"]

# -- Nova condition types (reconciler.md §8.1) --------------------------------------------------
SECRETS_READY: Final = "SecretsReady"
COMPUTE_CONFIG_READY: Final = "ComputeConfigReady"
DATABASE_READY: Final = "DatabaseReady"
CONDUCTOR_READY: Final = "ConductorReady"
SCHEDULER_READY: Final = "SchedulerReady"
METADATA_READY: Final = "MetadataReady"
CONSOLE_PROXY_READY: Final = "ConsoleProxyReady"
DEPLOYMENT_READY: Final = "DeploymentReady"
DB_ARCHIVE_READY: Final = "DBArchiveReady"
NOVA_API_READY: Final = "NovaAPIReady"
HPA_READY: Final = "HPAReady"
NETWORK_POLICY_READY: Final = "NetworkPolicyReady"
HTTP_ROUTE_READY: Final = "HTTPRouteReady"
METADATA_HTTP_ROUTE_READY: Final = "MetadataHTTPRouteReady"
CONSOLE_HTTP_ROUTE_READY: Final = "ConsoleHTTPRouteReady"
EXTRA_CONFIG_HEALTHY: Final = "ExtraConfigHealthy"
SERVICE_RECORDS_HEALTHY: Final = "ServiceRecordsHealthy"  # beyond the spec: the ServiceRecords step
READY: Final = "Ready"

NOVA_READY_INPUTS: Final[tuple[str, ...]] = (
    SECRETS_READY,
    COMPUTE_CONFIG_READY,
    DATABASE_READY,
    CONDUCTOR_READY,
    SCHEDULER_READY,
    METADATA_READY,
    CONSOLE_PROXY_READY,
    DEPLOYMENT_READY,
    DB_ARCHIVE_READY,
    NOVA_API_READY,
    HPA_READY,
    NETWORK_POLICY_READY,
    HTTP_ROUTE_READY,
    METADATA_HTTP_ROUTE_READY,
    CONSOLE_HTTP_ROUTE_READY,
)
"""The fifteen conditions ``Ready`` aggregates; ``ExtraConfigHealthy`` and ``ServiceRecordsHealthy`` are
left out on purpose (overrides the user chose; leftover records of gone pods, which a Nova whose API
works must not lose ``Ready`` over)."""

# -- NovaCompute condition types (novacompute-crd.md §17) ---------------------------------------
NOVA_REF_READY: Final = "NovaReady"
NODES_READY: Final = "NodesReady"
CONFIG_READY: Final = "ConfigReady"
DAEMONSET_READY: Final = "DaemonSetReady"
VPA_READY: Final = "VPAReady"
AGGREGATES_READY: Final = "AggregatesReady"
SERVICES_READY: Final = "ServicesReady"

NOVACOMPUTE_READY_INPUTS: Final[tuple[str, ...]] = (
    NOVA_REF_READY,
    NODES_READY,
    CONFIG_READY,
    DAEMONSET_READY,
    AGGREGATES_READY,
    SERVICES_READY,
    VPA_READY,
)

REASON_ALL_READY: Final = "AllReady"
REASON_NOT_ALL_READY: Final = "NotAllReady"
MESSAGE_ALL_READY: Final = "All sub-conditions are ready"


def find(conditions: Iterable[Mapping[str, Any]], cond_type: str) -> Mapping[str, Any] | None:
    for c in conditions:
        if c.get("type") == cond_type:
            return c
    return None


def is_true(conditions: Iterable[Mapping[str, Any]], cond_type: str) -> bool:
    c = find(conditions, cond_type)
    return c is not None and c.get("status") == "True"


def bounded_message(message: str, limit: int = CONDITION_MESSAGE_MAX) -> str:
    """``message`` cut to the CRD's ``maxLength`` (characters) with a marker saying so.

    A longer message makes the API server refuse the whole status write, pass after pass, and
    ``Ready`` stays stale. Deterministic: the same message always yields the same text.
    """
    if len(message) <= limit:
        return message
    marker = f" ... [truncated: {len(message)} characters in all]"
    return message[: limit - len(marker)] + marker


def set_condition(
    conditions: MutableSequence[Condition],
    cond_type: str,
    status: Status | bool,
    reason: str,
    message: str,
    *,
    generation: int,
    now: datetime,
) -> Condition:
    """Insert or update one condition; keep ``lastTransitionTime`` unless the status flips."""
    value: Status = ("True" if status else "False") if isinstance(status, bool) else status
    existing = next((c for c in conditions if c.get("type") == cond_type), None)
    if existing is None:
        existing = {"type": cond_type}
        conditions.append(existing)
        existing["lastTransitionTime"] = rfc3339(now)
    elif existing.get("status") != value or "lastTransitionTime" not in existing:
        existing["lastTransitionTime"] = rfc3339(now)
    existing["status"] = value
    existing["reason"] = reason
    existing["message"] = bounded_message(message)
    existing["observedGeneration"] = generation
    return existing


def remove(conditions: MutableSequence[Condition], cond_type: str) -> None:
    for i, c in enumerate(conditions):
        if c.get("type") == cond_type:
            del conditions[i]
            return


def not_ready(conditions: Iterable[Mapping[str, Any]], inputs: Iterable[str]) -> list[str]:
    """The aggregate's inputs that are missing or not True, in declared order."""
    conds = list(conditions)
    return [t for t in inputs if not is_true(conds, t)]


def set_ready(
    conditions: MutableSequence[Condition], inputs: Iterable[str], *, generation: int, now: datetime
) -> Condition:
    """Recompute ``Ready`` from whatever conditions are present now (a missing one counts as not True)."""
    missing = not_ready(conditions, inputs)
    if not missing:
        return set_condition(
            conditions, READY, True, REASON_ALL_READY, MESSAGE_ALL_READY, generation=generation, now=now
        )
    return set_condition(
        conditions,
        READY,
        False,
        REASON_NOT_ALL_READY,
        "Not ready: " + ", ".join(missing),
        generation=generation,
        now=now,
    )
