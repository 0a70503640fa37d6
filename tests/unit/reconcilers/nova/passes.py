"""Shared helpers of the tests beside this module (not a test module)."""

from __future__ import annotations

import base64
import copy
from datetime import UTC, datetime
from typing import Any, cast

from nova_operator.kube import Kube
from nova_operator.kube.resources import (
    CONFIGMAPS,
    DEPLOYMENTS,
    JOBS,
    NOVAS,
    SECRETS,
)
from nova_operator.metrics import Metrics
from nova_operator.models.nova import Nova
from nova_operator.reconcilers.metrics import NovaMetrics
from nova_operator.reconcilers.nova.context import NovaOptions, PassContext
from nova_operator.runtime.cache import Cache

NS = "ns"


UID = "nova-uid"


def nova_obj(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": NOVAS.api_version,
        "kind": "Nova",
        "metadata": {"name": "nova", "namespace": NS, "uid": UID, "generation": 3, "resourceVersion": "1"},
        "spec": {
            "openStackRelease": "2025.2",
            "image": {"repository": "ghcr.io/c5c3/nova", "tag": "2025.2"},
            "apiDatabase": {"host": "db", "database": "nova_api", "secretRef": {"name": "api-db"}},
            "database": {"host": "db", "database": "nova", "secretRef": {"name": "cell-db"}},
            "cache": {"servers": ["memcached:11211"]},
            "messaging": {"secretRef": {"name": "bus"}},
            "keystoneEndpoint": "http://keystone:5000/v3",
            "serviceUser": {"secretRef": {"name": "service-user"}},
            "metadata": {"sharedSecretRef": {"name": "metadata-proxy"}},
        },
    }
    body["spec"].update(spec)
    return body


def secret(name: str, **data: str) -> dict[str, Any]:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "data": encoded,
    }


def make_ctx(
    kube: Any, events: Any, *objects: dict[str, Any], options: NovaOptions | None = None, **spec: Any
) -> PassContext:
    caches = {ref: Cache(str(ref)) for ref in (SECRETS, CONFIGMAPS, DEPLOYMENTS, JOBS)}
    refs = {"Secret": SECRETS, "ConfigMap": CONFIGMAPS, "Deployment": DEPLOYMENTS, "Job": JOBS}
    for obj in objects:
        caches[refs[obj["kind"]]].upsert(obj)
    raw = nova_obj(**spec)
    return PassContext(
        kube=kube,
        obj=raw,
        nova=Nova.model_validate(raw),
        status={},
        now=lambda: datetime(2026, 1, 1, tzinfo=UTC),
        events=events,
        caches=caches,
        metrics=NovaMetrics.of(kube.metrics),
        options=options or NovaOptions(),
    )


ALL_SECRETS = (
    secret("api-db", username="a", password="pa"),
    secret("cell-db", username="c", password="pc"),
    secret("service-user", password="ps"),
    secret("metadata-proxy", shared_secret="pm"),
)


def managed_nova(api_cluster: str = "mariadb", cell_cluster: str = "mariadb") -> dict[str, Any]:
    return {
        "apiVersion": NOVAS.api_version,
        "kind": "Nova",
        "metadata": {"name": "nova", "namespace": NS, "uid": "nova-uid", "generation": 2},
        "spec": {
            "openStackRelease": "2025.2",
            "image": {"repository": "ghcr.io/c5c3/nova", "tag": "2025.2"},
            "apiDatabase": {
                "clusterRef": {"name": api_cluster},
                "database": "nova_api",
                "secretRef": {"name": "api-db"},
            },
            "database": {
                "clusterRef": {"name": cell_cluster},
                "database": "nova",
                "secretRef": {"name": "cell-db"},
            },
            "cache": {"servers": ["memcached:11211"]},
            "messaging": {"secretRef": {"name": "bus"}},
            "keystoneEndpoint": "http://keystone:5000/v3",
            "serviceUser": {"secretRef": {"name": "service-user"}},
            "metadata": {"sharedSecretRef": {"name": "metadata-proxy"}},
        },
    }


class RecordingKube:
    def __init__(self, *objs: dict[str, Any]) -> None:
        self.metrics = Metrics()
        self.objs = {o["metadata"]["name"]: o for o in objs}
        self.gets: list[str] = []

    async def get(self, ref: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.gets.append(name)
        return copy.deepcopy(self.objs[name])


def ctx_with(kube: RecordingKube, secrets: Cache) -> PassContext:
    raw = managed_nova()
    return PassContext(
        kube=cast(Kube, kube),
        obj=raw,
        nova=Nova.model_validate(raw),
        status={},
        now=lambda: datetime(2026, 1, 1, tzinfo=UTC),
        events=None,  # type: ignore[arg-type]
        caches={SECRETS: secrets},
        metrics=NovaMetrics.of(kube.metrics),
    )
