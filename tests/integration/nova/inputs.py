"""Shared helpers of the tests beside this module (not a test module)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from nova_operator import conditions
from nova_operator.kube import Kube
from nova_operator.kube.resources import (
    EVENTS,
    MARIADBS,
    NOVAS,
    RABBITMQ_CLUSTERS,
    SECRETS,
)
from nova_operator.kube.types import Object
from nova_operator.metrics import Metrics

from .conftest import (  # type: ignore[import-not-found]
    Operator,
    ready_condition,
)

SECRETS_DATA = {
    "api-db": {"username": "nova_api", "password": "s3cret-api-db-password"},
    "cell-db": {"username": "nova", "password": "s3cret-cell-db-password"},
    "service-user": {"password": "s3cret-service-user-password"},
    "metadata-proxy": {"shared_secret": "s3cret-metadata-shared-secret"},
    "bus": {"transport_url": "rabbit://nova:s3cret-bus-password@rabbitmq.example.org:5672/"},
}


SECRET_VALUES = [v for d in SECRETS_DATA.values() for v in d.values() if "s3cret" in v]


def nova_body(name: str = "nova", **spec: Any) -> Object:
    body: Object = {
        "apiVersion": NOVAS.api_version,
        "kind": "Nova",
        "metadata": {"name": name},
        "spec": {
            "openStackRelease": "2025.2",
            "image": {"repository": "ghcr.io/c5c3/nova", "tag": "2025.2"},
            "apiDatabase": {
                "clusterRef": {"name": "mariadb"},
                "database": "nova_api",
                "secretRef": {"name": "api-db"},
            },
            "database": {
                "clusterRef": {"name": "mariadb"},
                "database": "nova",
                "secretRef": {"name": "cell-db"},
            },
            "cache": {"servers": ["memcached:11211"]},
            "messaging": {"secretRef": {"name": "bus"}},
            "keystoneEndpoint": "http://keystone.example.org:5000/v3",
            "serviceUser": {"secretRef": {"name": "service-user"}},
            "metadata": {"sharedSecretRef": {"name": "metadata-proxy"}},
            "api": {"deployment": {"replicas": 1}},
            "consoleProxy": {"gateway": {"hostname": "novnc.example.org", "parentRef": {"name": "public"}}},
        },
    }
    body["spec"].update(spec)
    return body


def secret(name: str, data: dict[str, str]) -> Object:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": encoded}


async def create_inputs(admin: Kube, ns: str, *, skip: tuple[str, ...] = ()) -> None:
    for name, data in SECRETS_DATA.items():
        if name not in skip:
            await admin.create(SECRETS, secret(name, data), ns)
    mariadb = {
        "apiVersion": MARIADBS.api_version,
        "kind": "MariaDB",
        "metadata": {"name": "mariadb"},
        "spec": {},
    }
    await admin.create(MARIADBS, mariadb, ns)
    await admin.patch_status(MARIADBS, "mariadb", {"status": {"conditions": ready_condition()}}, ns)


def cond(nova: Object, cond_type: str) -> Object:
    found = conditions.find((nova.get("status") or {}).get("conditions") or [], cond_type)
    return dict(found) if found is not None else {}


def is_ready(nova: Object) -> bool:
    return cond(nova, "Ready").get("status") == "True"


async def events_of(admin: Kube, ns: str) -> list[tuple[str, str, str]]:
    items = (await admin.list(EVENTS, ns)).get("items") or []
    return [
        (e["type"], e["reason"], e["message"]) for e in items if e["involvedObject"].get("kind") == "Nova"
    ]


def sample_value(metrics: Any, name: str, labels: dict[str, str]) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return float(value or 0.0)


Counts = dict[tuple[str, str], float]


def requests_by_verb(metrics: Metrics) -> Counts:
    """Every request the operator sent so far, by (verb, resource), whatever the answer."""
    return metrics.api_request_counts()


def grown(before: Counts, after: Counts) -> Counts:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}


async def settled(operator: Operator, quiet: float = 1.5, within: float = 30) -> None:
    """Until the operator sent nothing for ``quiet`` seconds (the install's last requeues are done)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    last, since = requests_by_verb(operator.metrics), loop.time()
    while loop.time() - since < quiet:
        assert loop.time() < deadline, "the operator never went quiet"
        await asyncio.sleep(0.1)
        now = requests_by_verb(operator.metrics)
        if now != last:
            last, since = now, loop.time()


async def create_bus(admin: Kube, ns: str) -> None:
    """A RabbitmqCluster whose status publishes its default-user Secret, as its operator would."""
    data = {"username": "nova", "password": "s3cret-managed-bus", "host": "rabbitmq", "port": "5672"}
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "rabbitmq-default-user"}}
    await admin.create(SECRETS, {**secret, "data": encoded}, ns)
    cluster = {
        "apiVersion": RABBITMQ_CLUSTERS.api_version,
        "kind": "RabbitmqCluster",
        "metadata": {"name": "rabbitmq"},
        "spec": {},
    }
    await admin.create(RABBITMQ_CLUSTERS, cluster, ns)
    status = {
        "conditions": ready_condition(),
        "defaultUser": {
            "secretReference": {
                "name": "rabbitmq-default-user",
                "namespace": ns,
                "keys": {"username": "username", "password": "password"},
            }
        },
    }
    await admin.patch_status(RABBITMQ_CLUSTERS, "rabbitmq", {"status": status}, ns)


BAD_TOLERATION = {
    "key": "example.org/maintenance",
    "operator": "Equal",
    "value": "yes",
    "effect": "NoSchedule",
    "tolerationSeconds": 30,
}


class RecordingKube(Kube):
    """The operator's client, recording the method and path of every request it sends."""

    sent: list[tuple[str, str]]

    async def _send(self, verb: str, resource: str, method: str, path: str, **kw: Any) -> Any:
        self.sent.append((method, path))
        return await super()._send(verb, resource, method, path, **kw)
