"""What the Nova controller reads of the kinds it watches but does not write: the caches keep only that.

Every informer keeps ``apiVersion``, ``kind`` and the whole ``metadata`` (keys, indexes, labels,
owner references, resourceVersions; ``runtime.transform``). The trees below add what the
readers named beside each entry read; a kind not listed here is kept whole:

- the Nova itself (its spec is rendered, its status is the pass's starting point, the NovaCompute
  controller shares the informer);
- every child the operator applies: ``apply.carries`` compares the cached object with the whole
  desired one (metadata, spec, data), the readiness checks (``readiness``) read their status and
  the steps surface its messages;
- Secrets (the scoped informer): their ``data`` is what is read.

Keep a tree in step with its readers: a field read here but not kept reads as absent, which a
reader takes for "not ready yet" or "not published", so a missing entry shows up as a pass that
never converges (tests/unit/reconcilers/test_cache_fields.py runs the readers on kept objects).
"""

from __future__ import annotations

from typing import Final

from nova_operator.kube.resources import (
    CLUSTER_SECRET_STORES,
    MARIADBS,
    RABBITMQ_CLUSTERS,
    SECRET_STORES,
    ResourceRef,
)
from nova_operator.runtime.transform import ALL, Fields

READY_CONDITIONS: Final[Fields] = {"status": {"conditions": ALL}}
"""``readiness.custom_resource_ready``: the MariaDB gate of the Database step, the store gate of Secrets."""

KEPT: Final[dict[ResourceRef, Fields]] = {
    MARIADBS: READY_CONDITIONS,  # database._provision: custom_resource_ready; mapper: metadata only
    SECRET_STORES: READY_CONDITIONS,  # secrets._store_gate: custom_resource_ready
    CLUSTER_SECRET_STORES: READY_CONDITIONS,
    # transport_url._managed_url: status.defaultUser.secretReference (name, namespace); mapper: metadata
    RABBITMQ_CLUSTERS: {"status": {"defaultUser": {"secretReference": ALL}}},
}


def kept(ref: ResourceRef) -> Fields | None:
    """The tree the Nova controller keeps of ``ref`` (``ALL``: the whole object)."""
    return KEPT.get(ref, ALL)
