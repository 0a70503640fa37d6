"""Shared helpers of the tests beside this module (not a test module)."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


_BASES: dict[str, Obj] = {
    "novas": {
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "Nova",
        "metadata": {"name": "nova"},
        "spec": {
            "openStackRelease": "2025.2",
            "image": {"repository": "ghcr.io/c5c3/nova", "tag": "2025.2"},
            "apiDatabase": {"clusterRef": {"name": "m"}, "database": "nova_api", "secretRef": {"name": "a"}},
            "database": {"clusterRef": {"name": "m"}, "database": "nova", "secretRef": {"name": "c"}},
            "cache": {"clusterRef": {"name": "memcached"}},
            "messaging": {"clusterRef": {"name": "rabbitmq"}},
            "keystoneEndpoint": "http://keystone:5000/v3",
            "serviceUser": {"secretRef": {"name": "nova-service-user"}},
            "metadata": {"sharedSecretRef": {"name": "nova-metadata-proxy"}},
        },
    },
    "novacomputes": {
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "NovaCompute",
        "metadata": {"name": "pool"},
        "spec": {"novaRef": {"name": "nova"}, "nodeSelector": {"example.org/pool": "a"}},
    },
}
