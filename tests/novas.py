"""The one Nova the step and decision tests build (not a test module).

``nova_spec`` is a complete spec with brownfield databases by host, every input named by a Secret;
the integration tier stores it on the API server (``tests/integration/nova/passes.py``), the unit
tier's decision tests read it as the informer cache would hold it (``nova_object``).
"""

from __future__ import annotations

from typing import Any

from nova_operator.kube.resources import NOVAS


def nova_spec(**spec: Any) -> dict[str, Any]:
    """The spec, with ``spec`` laid over it (a top-level field replaced whole)."""
    body: dict[str, Any] = {
        "openStackRelease": "2025.2",
        "image": {"repository": "ghcr.io/c5c3/nova", "tag": "2025.2"},
        "apiDatabase": {"host": "db", "database": "nova_api", "secretRef": {"name": "api-db"}},
        "database": {"host": "db", "database": "nova", "secretRef": {"name": "cell-db"}},
        "cache": {"servers": ["memcached:11211"]},
        "messaging": {"secretRef": {"name": "bus"}},
        "keystoneEndpoint": "http://keystone:5000/v3",
        "serviceUser": {"secretRef": {"name": "service-user"}},
        "metadata": {"sharedSecretRef": {"name": "metadata-proxy"}},
    }
    body.update(spec)
    return body


def nova_object(namespace: str, name: str = "nova", **spec: Any) -> dict[str, Any]:
    """A Nova as a cache holds it: server fields of a stored object (uid, generation, version)."""
    meta = {
        "name": name,
        "namespace": namespace,
        "uid": f"{name}-uid",
        "generation": 2,
        "resourceVersion": "1",
    }
    return {"apiVersion": NOVAS.api_version, "kind": "Nova", "metadata": meta, "spec": nova_spec(**spec)}
