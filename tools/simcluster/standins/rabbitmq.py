"""The RabbitMQ cluster operator stand-in (v2.16.0 API).

A ``RabbitmqCluster`` gets its ``<name>-default-user`` Secret (keys username, password, host, port,
connection_string, provider, type, default_user.conf), ``status.defaultUser`` / ``binding`` /
conditions, and the deletion finalizer the real operator adds (dropped when the cluster is
deleted). With a ``Backend`` (the real tier) the default user is created on the real broker, and
the cluster gets a Service in front of it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import string
from collections.abc import Iterable

from simcluster.client.asynckube import JSON, ApiError
from simcluster.client.watchcache import key_of
from simcluster.standins.base import Key, StandIn
from simcluster.standins.objects import condition, owner_reference, random_text

RABBIT = "/apis/rabbitmq.com/v1beta1"
FINALIZER = "deletion.finalizers.rabbitmqclusters.rabbitmq.com"


class RabbitMQOperator(StandIn):
    watches = (f"{RABBIT}/rabbitmqclusters", "/api/v1/secrets", "/api/v1/services")
    kinds = frozenset({"rabbitmqclusters"})

    def affected(self, kind: str, obj: JSON) -> Iterable[Key]:
        if kind == "secrets":
            ns, name = key_of(obj)
            for r in self.store("rabbitmqclusters").list(ns):
                if f"{r['metadata']['name']}-default-user" == name:
                    yield ("rabbitmqclusters", *key_of(r))

    async def reconcile(self, kind: str, obj: JSON) -> None:
        meta = obj["metadata"]
        ns, name = meta["namespace"], meta["name"]
        secret_name = f"{name}-default-user"
        going = meta.get("deletionTimestamp") and FINALIZER in meta.get("finalizers", [])
        if going and self.backend is not None:
            user = self.secret_value(ns, secret_name, "username")
            if user:
                await asyncio.to_thread(self.backend.delete_broker_user, user)
        if await self.finalize(RABBIT, "rabbitmqclusters", obj, FINALIZER):
            return
        if self.store("secrets").get(ns, secret_name) is None:
            await self._create_default_user(obj, secret_name)
            if self.backend is not None:
                return  # the Secret's watch event brings its user to the broker, then the status
        if self.backend is not None:
            user = self.secret_value(ns, secret_name, "username")
            password = self.secret_value(ns, secret_name, "password")
            if not (user and password):
                return
            await asyncio.to_thread(self.backend.ensure_broker_user, user, password)
            await self.backend_service(obj, RABBIT, "RabbitmqCluster", "rabbitmq", 5672)
        status = {
            "observedGeneration": meta.get("generation", 1),
            "conditions": [
                condition("AllReplicasReady", True, "AllPodsAreReady"),
                condition("ClusterAvailable", True, "AtLeastOneEndpointAvailable"),
                condition("NoWarnings", True, "NoWarnings"),
                condition("ReconcileSuccess", True, "Success", "Finish reconciling"),
            ],
            "binding": {"name": secret_name},
            "defaultUser": {
                "secretReference": {
                    "name": secret_name,
                    "namespace": ns,
                    "keys": {"username": "username", "password": "password"},
                },
                "serviceReference": {"name": name, "namespace": ns},
            },
        }
        await self.write_status(RABBIT, "rabbitmqclusters", obj, status)

    async def _create_default_user(self, rmq: JSON, secret_name: str) -> None:
        meta, spec = rmq["metadata"], rmq.get("spec", {})
        ns, name = meta["namespace"], meta["name"]
        tls = spec.get("tls") or {}
        port = "5671" if tls.get("secretName") and tls.get("disableNonTLSListeners") else "5672"
        username = f"default_user_{random_text(20, string.ascii_letters + string.digits + '-_')}"
        password = random_text(32, string.ascii_letters + string.digits + "-_")
        host = f"{name}.{ns}.svc"
        data = {
            "username": username,
            "password": password,
            "host": host,
            "port": port,
            "provider": "rabbitmq",
            "type": "rabbitmq",
            "connection_string": f"amqp://{username}:{password}@{host}:{port}/",
            "default_user.conf": f"default_user = {username}\ndefault_pass = {password}\n",
        }
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": secret_name,
                "namespace": ns,
                "labels": {
                    "app.kubernetes.io/name": name,
                    "app.kubernetes.io/component": "rabbitmq",
                    "app.kubernetes.io/part-of": "rabbitmq",
                },
                "ownerReferences": [owner_reference(rmq, "rabbitmq.com/v1beta1", "RabbitmqCluster")],
            },
            "type": "Opaque",
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
        }
        with contextlib.suppress(ApiError):  # AlreadyExists after a race: fine
            self.remember("secrets", await self.kube.create(f"/api/v1/namespaces/{ns}/secrets", body))
