"""Stand-ins for the operators the Nova operator depends on, as small asyncio controllers.

Each writes what the real controller writes on the objects the Nova operator reads, and nothing
more (no StatefulSets, Services or databases behind them):

* mariadb-operator (v26.6.0 API): ``MariaDB``, ``Database``, ``User``, ``Grant`` get
  ``status.conditions[type=Ready]``; Database/User/Grant get the finalizer the real controllers
  add and lose it when deleted. A Database, User or Grant turns Ready only once its MariaDB is
  Ready; a User also needs its password Secret key, a Grant its User.
* RabbitMQ cluster operator (v2.16.0 API): ``RabbitmqCluster`` gets its ``<name>-default-user``
  Secret (keys username, password, host, port, connection_string, provider, type,
  default_user.conf), ``status.defaultUser`` / ``binding`` / conditions, and the deletion finalizer
  the real operator adds (dropped when the cluster is deleted).
* nova-compute and host discovery, on the fake Nova API: a Ready ``nova-compute`` pool pod
  registers its node as a compute service (unmapped), a Succeeded ``discover-hosts`` Job pod maps
  every registered host, and a service whose pod is gone is reported ``down``.
* A Gateway API controller (``simcluster.nova.openstack.c5c3.io/gateway-controller``):
  GatewayClasses naming it are Accepted, their Gateways Accepted/Programmed, and HTTPRoutes
  attached to those Gateways get ``status.parents`` with Accepted and ResolvedRefs (False with
  ``BackendNotFound`` while a backend Service is missing).

Watch-driven (``watchcache``): each collection is cached by list + watch, and a change queues the
keys of the objects it affects, which are reconciled from the caches; a stand-in answers within
moments however many objects there are (the benchmark's 100 Novas: 500 MariaDB objects). The
compute agent keeps a loop of its own (pod events or a 2 s tick).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import secrets
import string
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from simcluster.client.asynckube import JSON, ApiError, AsyncKube, sleep_or
from simcluster.client.watchcache import KeyQueue, Store, key_of, reflect, run_until, run_workers
from simcluster.standins.openstack import FakeOpenStack

log = logging.getLogger("simcluster.standins")

MARIADB = "/apis/k8s.mariadb.com/v1alpha1"
RABBIT = "/apis/rabbitmq.com/v1beta1"
GATEWAY = "/apis/gateway.networking.k8s.io/v1"
GATEWAY_CONTROLLER = "simcluster.nova.openstack.c5c3.io/gateway-controller"
GATEWAY_CLASS = "simcluster"
FINALIZERS = {
    "databases": "database.k8s.mariadb.com/finalizer",
    "users": "user.k8s.mariadb.com/finalizer",
    "grants": "grant.k8s.mariadb.com/finalizer",
    "rabbitmqclusters": "deletion.finalizers.rabbitmqclusters.rabbitmq.com",
}
# Watched (and cached) collections; a store is named by the path's last segment.
WATCHED = [
    f"{MARIADB}/mariadbs",
    f"{MARIADB}/databases",
    f"{MARIADB}/users",
    f"{MARIADB}/grants",
    f"{RABBIT}/rabbitmqclusters",
    f"{GATEWAY}/gatewayclasses",
    f"{GATEWAY}/gateways",
    f"{GATEWAY}/httproutes",
    "/api/v1/secrets",
    "/api/v1/services",
]
# Pods the compute agent follows (labels of novacompute-crd.md §9.1 and §15).
COMPUTE_COMPONENT = "nova-compute"
DISCOVERY_COMPONENT = "discover-hosts"
COMPUTE_PODS = (
    "/api/v1/pods?labelSelector=app.kubernetes.io%2Fcomponent%20in%20%28"
    f"{COMPUTE_COMPONENT}%2C{DISCOVERY_COMPONENT}%29"
)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(
    type_: str, status: bool, reason: str, message: str = "", generation: int | None = None
) -> JSON:
    c: JSON = {
        "type": type_,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now(),
    }
    if generation is not None:
        c["observedGeneration"] = generation
    return c


def merge_conditions(old: Iterable[JSON], new: Iterable[JSON]) -> list[JSON]:
    """New conditions, keeping lastTransitionTime of those whose status did not change."""
    previous = {c.get("type"): c for c in old}
    out = []
    for c in new:
        p = previous.get(c["type"])
        if p is not None and p.get("status") == c["status"]:
            c = {**c, "lastTransitionTime": p.get("lastTransitionTime", c["lastTransitionTime"])}
        out.append(c)
    return out


def same_conditions(a: Iterable[JSON], b: Iterable[JSON]) -> bool:
    def key(cs: Iterable[JSON]) -> list[tuple[Any, ...]]:
        return sorted(
            (c.get("type"), c.get("status"), c.get("reason"), c.get("message"), c.get("observedGeneration"))
            for c in cs
        )

    return key(a) == key(b)


def is_ready(obj: JSON | None) -> bool:
    if obj is None:
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in obj.get("status", {}).get("conditions", [])
    )


def is_pod_ready(pod: JSON) -> bool:
    status = pod.get("status", {})
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions", [])
    )


def _path(base: str, plural: str, obj: JSON) -> str:
    return f"{base}/namespaces/{obj['metadata']['namespace']}/{plural}/{obj['metadata']['name']}"


def _random(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


class Backend(Protocol):
    """The servers behind the MariaDB and RabbitMQ objects, when they are real (the real-Nova tier).

    Blocking calls: the stand-ins run them in a thread. Without a backend the stand-ins only write
    status, as before. Names are the server's own: every MariaDB object maps to one server here, so
    two Novas that name the same schema or user share it (the real tier gives each its own names).
    """

    def create_database(self, name: str, *, charset: str, collation: str) -> None: ...
    def drop_database(self, name: str) -> None: ...
    def ensure_user(self, name: str, password: str, *, max_connections: int, host: str) -> None: ...
    def drop_user(self, name: str, host: str) -> None: ...
    def grant(
        self,
        privileges: Sequence[str],
        database: str,
        table: str,
        user: str,
        *,
        host: str,
        grant_option: bool,
    ) -> None: ...
    def revoke_all(self, database: str, table: str, user: str, *, host: str) -> None: ...
    def ensure_broker_user(self, name: str, password: str) -> None: ...
    def delete_broker_user(self, name: str) -> None: ...
    def endpoint(self, kind: str) -> tuple[str, int]:
        """Where the real server of ``kind`` ("mariadb", "rabbitmq") listens: address and port."""
        ...


Key = tuple[str, str, str]  # kind (plural), namespace, name
RESYNC_SECONDS = 30.0  # every key is looked at again this often, whatever the watches said
WORKERS = 16  # concurrent writes: a burst of 100 Novas' 800 MariaDB objects clears in seconds


class StandIns:
    """Runs every stand-in controller until ``stop`` is set.

    Watch-driven: one cache per collection (list + watch), and a work queue of object keys that
    the watch events (and the objects they affect: a MariaDB's Databases, a User's Grants, a
    Secret's Users, a Service's HTTPRoutes, ...) feed; each key is reconciled from the caches, so
    an object is answered within moments of its change however many others exist. Every key is
    looked at again every 30 s. The compute agent keeps its own loop (pod events or a 2 s tick).
    """

    def __init__(
        self, kube: AsyncKube, openstack: FakeOpenStack | None = None, backend: Backend | None = None
    ) -> None:
        self.kube = kube
        self.openstack = openstack
        self.backend = backend
        self.kick = asyncio.Event()  # the compute agent's wake-up
        self.passes = 0  # compute agent passes
        self.handled = 0  # keys reconciled
        self.queue: KeyQueue[Key] = KeyQueue()
        self.stores = {path.rsplit("/", 1)[1]: Store(path.rsplit("/", 1)[1], path) for path in WATCHED}
        self._discovered: set[str] = set()  # uids of discover-hosts pods already acted on

    def store(self, kind: str) -> Store:
        return self.stores[kind]

    async def run(self, stop: asyncio.Event) -> None:
        tasks = [
            asyncio.create_task(reflect(self.kube, s, self._changed, stop), name=f"watch {s.path}")
            for s in self.stores.values()
        ]
        tasks.append(asyncio.create_task(run_workers(self.queue, self._handle, WORKERS, stop)))
        tasks.append(asyncio.create_task(self._resync(stop), name="stand-in resync"))
        if self.openstack is not None:
            tasks.append(asyncio.create_task(self._compute_loop(self.openstack, stop), name="compute agent"))
        await run_until(stop, tasks)

    async def _resync(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await sleep_or(stop, RESYNC_SECONDS)
            for kind, store in self.stores.items():
                if kind in HANDLED:
                    for ns, name in list(store.objects):
                        self.queue.add((kind, ns, name))

    # -- what a change affects -------------------------------------------------------------

    def _changed(self, store: Store, obj: JSON, deleted: bool) -> None:
        kind = store.kind
        ns, name = key_of(obj)
        add = self.queue.add
        if kind in HANDLED:
            add((kind, ns, name))
        if kind == "mariadbs":
            for plural in ("databases", "users", "grants"):
                for o in self.store(plural).list(ns):
                    add((plural, *key_of(o)))
        elif kind == "users":
            for g in self.store("grants").list(ns):
                add(("grants", *key_of(g)))
        elif kind == "secrets":
            for u in self.store("users").list(ns):
                if (u.get("spec", {}).get("passwordSecretKeyRef") or {}).get("name") == name:
                    add(("users", *key_of(u)))
            for r in self.store("rabbitmqclusters").list(ns):
                if f"{r['metadata']['name']}-default-user" == name:
                    add(("rabbitmqclusters", *key_of(r)))
        elif kind == "gatewayclasses":
            for plural in ("gateways", "httproutes"):
                for o in self.store(plural).list():
                    add((plural, *key_of(o)))
        elif kind == "gateways":
            for r in self.store("httproutes").list():
                if (ns, name) in _route_parents(r):
                    add(("httproutes", *key_of(r)))
        elif kind == "httproutes":
            for gw_ns, gw_name in _route_parents(obj):
                add(("gateways", gw_ns, gw_name))
        elif kind == "services":
            for r in self.store("httproutes").list():
                if (ns, name) in _route_backends(r):
                    add(("httproutes", *key_of(r)))

    async def _handle(self, key: Key) -> None:
        kind, ns, name = key
        obj = self.store(kind).get(ns, name)
        self.handled += 1
        if obj is None:
            return
        if kind == "mariadbs":
            await self._mariadb(obj)
        elif kind in ("databases", "users", "grants"):
            await self._mariadb_child(kind, obj)
        elif kind == "rabbitmqclusters":
            await self._rabbitmq(obj)
        elif kind == "gatewayclasses":
            await self._gateway_class(obj)
        elif kind == "gateways":
            await self._gateway(obj)
        elif kind == "httproutes":
            await self._route(obj)

    # -- what nova-compute and discover_hosts do to the fake Nova API -----------------------

    async def _compute_loop(self, fake: FakeOpenStack, stop: asyncio.Event) -> None:
        watcher = asyncio.create_task(self._watch_pods(stop), name=f"watch {COMPUTE_PODS}")
        try:
            while not stop.is_set():
                self.kick.clear()
                try:
                    await self.compute_agent(fake)
                except ApiError as exc:
                    log.info("compute agent pass retried: %s", exc)
                except Exception:  # keep going; the log tells why
                    log.exception("compute agent pass failed")
                self.passes += 1
                await sleep_or(self.kick, 2.0)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher

    async def _watch_pods(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                async for _event in self.kube.watch(COMPUTE_PODS, timeout_seconds=50):
                    self.kick.set()
            except asyncio.CancelledError:
                raise
            except Exception:  # apiserver restarting, ...
                await asyncio.sleep(1.0)

    async def compute_agent(self, fake: FakeOpenStack) -> None:
        """A Ready nova-compute pod registers its node's service (unmapped, as nova-compute does on
        start); a Succeeded discover-hosts Job pod maps every registered host; a service whose pod
        is gone goes ``down``, as Nova reports it after service_down_time."""
        pods = await self.kube.list(COMPUTE_PODS)
        running: set[str] = set()
        for pod in pods:
            labels = pod["metadata"].get("labels", {})
            component = labels.get("app.kubernetes.io/component")
            node = pod.get("spec", {}).get("nodeName")
            if component == COMPUTE_COMPONENT and node and not pod["metadata"].get("deletionTimestamp"):
                if is_pod_ready(pod):
                    running.add(node)
                    svc = fake.service_by_host(node)
                    if svc is None:
                        fake.add_compute(node, mapped=False, by_agent=True)
                    elif svc.state == "down" and not svc.forced_down:
                        fake.set_service_state(node, "up")
            elif component == DISCOVERY_COMPONENT and pod.get("status", {}).get("phase") == "Succeeded":
                uid = pod["metadata"]["uid"]
                if uid not in self._discovered:
                    self._discovered.add(uid)
                    fake.map_all_hosts()
        for svc in fake.compute_services():
            if svc.host not in running and svc.state == "up" and svc.host in fake.agent_hosts:
                fake.set_service_state(svc.host, "down")

    # -- mariadb-operator --------------------------------------------------------------------

    async def _mariadb(self, m: JSON) -> None:
        if m["metadata"].get("deletionTimestamp"):
            return
        replicas = m.get("spec", {}).get("replicas", 1)
        status = {
            "conditions": [condition("Ready", True, "StatefulSetReady", "Running")],
            "currentPrimary": f"{m['metadata']['name']}-0",
            "currentPrimaryPodIndex": 0,
            "replicas": replicas,
        }
        if self.backend is not None:
            await self._backend_service(m, MARIADB, "MariaDB", "mariadb", 3306)
        await self._write_status(MARIADB, "mariadbs", m, status)

    async def _mariadb_child(self, plural: str, obj: JSON) -> None:
        meta = obj["metadata"]
        if (
            meta.get("deletionTimestamp")
            and self.backend
            and FINALIZERS[plural] in meta.get("finalizers", [])
        ):
            try:
                await asyncio.to_thread(self._drop_on_server, plural, obj)
            except Exception as exc:  # keep the finalizer: the next pass tries again
                log.warning("dropping %s %s failed: %s", plural, meta["name"], exc)
                return
        if await self._finalize(MARIADB, plural, obj):
            return
        ref = obj.get("spec", {}).get("mariaDbRef", {})
        ns = ref.get("namespace") or obj["metadata"]["namespace"]
        if not is_ready(self.store("mariadbs").get(ns, ref.get("name", ""))):
            return  # the real controller waits (waitForIt) and reports nothing useful yet
        if plural == "users" and not self._password_present(obj):
            return
        if plural == "grants" and not self._grant_user_ready(obj):
            return
        if self.backend is not None:
            try:
                await asyncio.to_thread(self._apply_on_server, plural, obj)
            except Exception as exc:
                msg = str(exc)
                if plural == "users":  # never echo a statement that may carry the password
                    msg = "creating the user failed"
                await self._write_status(
                    MARIADB, plural, obj, {"conditions": [condition("Ready", False, "Failed", msg[:500])]}
                )
                return
        await self._write_status(
            MARIADB, plural, obj, {"conditions": [condition("Ready", True, "Created", "Created")]}
        )

    def _apply_on_server(self, plural: str, obj: JSON) -> None:
        """What the mariadb-operator's controllers run on the server (blocking: in a thread)."""
        assert self.backend is not None
        spec, name = obj.get("spec", {}), obj["metadata"]["name"]
        if plural == "databases":
            self.backend.create_database(
                spec.get("name") or name,
                charset=spec.get("characterSet") or "utf8",
                collation=spec.get("collate") or "utf8_general_ci",
            )
        elif plural == "users":
            self.backend.ensure_user(
                spec.get("name") or name,
                self._password(obj),
                max_connections=int(spec.get("maxUserConnections") or 0),
                host=spec.get("host") or "%",
            )
        elif plural == "grants":
            self.backend.grant(
                spec.get("privileges") or [],
                spec.get("database") or "*",
                spec.get("table") or "*",
                spec["username"],
                host=spec.get("host") or "%",
                grant_option=bool(spec.get("grantOption")),
            )

    def _drop_on_server(self, plural: str, obj: JSON) -> None:
        assert self.backend is not None
        spec, name = obj.get("spec", {}), obj["metadata"]["name"]
        if plural == "databases":
            self.backend.drop_database(spec.get("name") or name)
        elif plural == "users":
            self.backend.drop_user(spec.get("name") or name, spec.get("host") or "%")
        elif plural == "grants":
            self.backend.revoke_all(
                spec.get("database") or "*",
                spec.get("table") or "*",
                spec["username"],
                host=spec.get("host") or "%",
            )

    def _password(self, user: JSON) -> str:
        ref = user.get("spec", {}).get("passwordSecretKeyRef") or {}
        secret = self.store("secrets").get(user["metadata"]["namespace"], ref.get("name", "")) or {}
        raw = (secret.get("data") or {}).get(ref.get("key", ""), "")
        return base64.b64decode(raw).decode() if raw else ""

    async def _finalize(self, base: str, plural: str, obj: JSON) -> bool:
        """Add the real controller's finalizer; on deletion remove it. True when the object is going away."""
        fin = FINALIZERS[plural]
        finalizers = list(obj["metadata"].get("finalizers", []))
        path = _path(base, plural, obj)
        if obj["metadata"].get("deletionTimestamp"):
            if fin in finalizers:
                finalizers.remove(fin)
                await self._patch_meta(plural, path, obj, finalizers)
            return True
        if fin not in finalizers:
            await self._patch_meta(plural, path, obj, [*finalizers, fin])
        return False

    async def _patch_meta(self, plural: str, path: str, obj: JSON, finalizers: list[str]) -> None:
        rv = obj["metadata"]["resourceVersion"]
        with contextlib.suppress(ApiError):  # conflict or gone: the watch brings the new state
            body = {"metadata": {"finalizers": finalizers, "resourceVersion": rv}}
            self._remember(plural, await self.kube.merge_patch(path, body))

    def _password_present(self, user: JSON) -> bool:
        ref = user.get("spec", {}).get("passwordSecretKeyRef")
        if not ref:
            return True
        secret = self.store("secrets").get(user["metadata"]["namespace"], ref.get("name", ""))
        return bool(secret and (secret.get("data") or {}).get(ref["key"]))

    def _grant_user_ready(self, grant: JSON) -> bool:
        ns, username = grant["metadata"]["namespace"], grant.get("spec", {}).get("username")
        return any(
            (u.get("spec", {}).get("name") or u["metadata"]["name"]) == username and is_ready(u)
            for u in self.store("users").list(ns)
        )

    # -- RabbitMQ cluster operator -----------------------------------------------------------

    async def _rabbitmq(self, rmq: JSON) -> None:
        meta = rmq["metadata"]
        ns, name = meta["namespace"], meta["name"]
        secret_name = f"{name}-default-user"
        going = meta.get("deletionTimestamp") and FINALIZERS["rabbitmqclusters"] in meta.get("finalizers", [])
        if going and self.backend is not None:
            user = self._secret_value(ns, secret_name, "username")
            if user:
                await asyncio.to_thread(self.backend.delete_broker_user, user)
        if await self._finalize(RABBIT, "rabbitmqclusters", rmq):
            return
        if self.store("secrets").get(ns, secret_name) is None:
            await self._create_default_user(rmq, secret_name)
            if self.backend is not None:
                return  # the Secret's watch event brings its user to the broker, then the status
        if self.backend is not None:
            user = self._secret_value(ns, secret_name, "username")
            password = self._secret_value(ns, secret_name, "password")
            if not (user and password):
                return
            await asyncio.to_thread(self.backend.ensure_broker_user, user, password)
            await self._backend_service(rmq, RABBIT, "RabbitmqCluster", "rabbitmq", 5672)
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
        await self._write_status(RABBIT, "rabbitmqclusters", rmq, status)

    async def _backend_service(
        self, owner: JSON, api_version: str, kind: str, server: str, port: int
    ) -> None:
        """The Service the cluster's operator would create (named as the object), here without a
        selector and with an EndpointSlice naming the real server; created once, owned by the object."""
        assert self.backend is not None
        meta = owner["metadata"]
        ns, name = meta["namespace"], meta["name"]
        if self.store("services").get(ns, name) is not None:
            return
        address, target = self.backend.endpoint(server)
        ref = [_owner(owner, api_version, kind)]
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": ns, "ownerReferences": ref},
            "spec": {"ports": [{"name": server, "port": port, "targetPort": target, "protocol": "TCP"}]},
        }
        endpoints = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-{server}",
                "namespace": ns,
                "labels": {
                    "kubernetes.io/service-name": name,
                    "endpointslice.kubernetes.io/managed-by": "simcluster.standins",
                },
                "ownerReferences": ref,
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"name": server, "port": target, "protocol": "TCP"}],
        }
        with contextlib.suppress(ApiError):  # AlreadyExists after a race: fine
            await self.kube.create(f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", endpoints)
        with contextlib.suppress(ApiError):
            self._remember("services", await self.kube.create(f"/api/v1/namespaces/{ns}/services", service))

    def _secret_value(self, ns: str, name: str, key: str) -> str:
        raw = ((self.store("secrets").get(ns, name) or {}).get("data") or {}).get(key, "")
        return base64.b64decode(raw).decode() if raw else ""

    async def _create_default_user(self, rmq: JSON, secret_name: str) -> None:
        meta, spec = rmq["metadata"], rmq.get("spec", {})
        ns, name = meta["namespace"], meta["name"]
        tls = spec.get("tls") or {}
        port = "5671" if tls.get("secretName") and tls.get("disableNonTLSListeners") else "5672"
        username = f"default_user_{_random(20, string.ascii_letters + string.digits + '-_')}"
        password = _random(32, string.ascii_letters + string.digits + "-_")
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
                "ownerReferences": [_owner(rmq, "rabbitmq.com/v1beta1", "RabbitmqCluster")],
            },
            "type": "Opaque",
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
        }
        with contextlib.suppress(ApiError):  # AlreadyExists after a race: fine
            self._remember("secrets", await self.kube.create(f"/api/v1/namespaces/{ns}/secrets", body))

    # -- Gateway API -------------------------------------------------------------------------

    def _our_classes(self) -> set[str]:
        return {
            c["metadata"]["name"]
            for c in self.store("gatewayclasses").list()
            if c.get("spec", {}).get("controllerName") == GATEWAY_CONTROLLER
        }

    def _our_gateway(self, namespace: str, name: str) -> JSON | None:
        gw = self.store("gateways").get(namespace, name)
        if gw is None or gw.get("spec", {}).get("gatewayClassName") not in self._our_classes():
            return None
        return gw

    async def _gateway_class(self, gc: JSON) -> None:
        if gc.get("spec", {}).get("controllerName") != GATEWAY_CONTROLLER:
            return
        gen = gc["metadata"].get("generation")
        conds = [
            condition("Accepted", True, "Accepted", "", gen),
            condition("SupportedVersion", True, "SupportedVersion", "", gen),
        ]
        await self._write_status(GATEWAY, "gatewayclasses", gc, {"conditions": conds}, cluster_scoped=True)

    async def _route(self, route: JSON) -> None:
        meta = route["metadata"]
        if meta.get("deletionTimestamp"):
            return
        gen = meta.get("generation")
        services = self.store("services")
        missing = [f"{ns}/{name}" for ns, name in _route_backends(route) if services.get(ns, name) is None]
        parents = [
            p
            for p in route.get("status", {}).get("parents", [])
            if p.get("controllerName") != GATEWAY_CONTROLLER
        ]
        old_ours = {
            repr(sorted(p["parentRef"].items())): p
            for p in route.get("status", {}).get("parents", [])
            if p.get("controllerName") == GATEWAY_CONTROLLER
        }
        for ref in _gateway_refs(route):
            if self._our_gateway(ref.get("namespace", meta["namespace"]), ref["name"]) is None:
                continue  # not a Gateway of ours: another controller (or none) answers for it
            resolved = (
                condition("ResolvedRefs", True, "ResolvedRefs", "", gen)
                if not missing
                else condition(
                    "ResolvedRefs",
                    False,
                    "BackendNotFound",
                    f"backend Service(s) not found: {', '.join(missing)}",
                    gen,
                )
            )
            new = [condition("Accepted", True, "Accepted", "", gen), resolved]
            old = old_ours.get(repr(sorted(ref.items())), {}).get("conditions", [])
            parents.append(
                {
                    "parentRef": ref,
                    "controllerName": GATEWAY_CONTROLLER,
                    "conditions": merge_conditions(old, new),
                }
            )
        current = route.get("status", {}).get("parents", [])
        if _parents_equal(current, parents):
            return
        with contextlib.suppress(ApiError):
            answer = await self.kube.merge_patch(
                _path(GATEWAY, "httproutes", route) + "/status", {"status": {"parents": parents}}
            )
            self._remember("httproutes", answer)

    async def _gateway(self, gw: JSON) -> None:
        ns, name = key_of(gw)
        if self._our_gateway(ns, name) is None:
            return
        routes = sum(
            1
            for r in self.store("httproutes").list()
            if not r["metadata"].get("deletionTimestamp") and (ns, name) in _named_parents(r)
        )
        gen = gw["metadata"].get("generation")
        listeners = [
            {
                "name": listener["name"],
                "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
                "attachedRoutes": routes,
                "conditions": [
                    condition("Accepted", True, "Accepted", "", gen),
                    condition("Programmed", True, "Programmed", "", gen),
                    condition("ResolvedRefs", True, "ResolvedRefs", "", gen),
                    condition("Conflicted", False, "NoConflicts", "", gen),
                ],
            }
            for listener in gw.get("spec", {}).get("listeners", [])
        ]
        status = {
            "addresses": [{"type": "IPAddress", "value": "10.0.0.1"}],
            "conditions": [
                condition("Accepted", True, "Accepted", "", gen),
                condition("Programmed", True, "Programmed", "", gen),
            ],
            "listeners": listeners,
        }
        await self._write_status(GATEWAY, "gateways", gw, status)

    # -- shared ------------------------------------------------------------------------------

    def _remember(self, plural: str, answer: JSON) -> None:
        """A write's answer is the newest object: cache it, so the next look does not repeat the write."""
        if answer.get("metadata"):
            self.store(plural).put(answer)

    async def _write_status(
        self, base: str, plural: str, obj: JSON, status: JSON, *, cluster_scoped: bool = False
    ) -> None:
        """Merge-patch ``status`` unless it already holds the same (conditions compared without times)."""
        old = obj.get("status", {}) or {}
        status = dict(status)
        if "conditions" in status:
            status["conditions"] = merge_conditions(old.get("conditions", []), status["conditions"])
        unchanged = all(
            same_conditions(old.get(k, []), v)
            if k == "conditions"
            else _strip_times(old.get(k)) == _strip_times(v)
            for k, v in status.items()
        )
        if unchanged:
            return
        path = f"{base}/{plural}/{obj['metadata']['name']}" if cluster_scoped else _path(base, plural, obj)
        with contextlib.suppress(ApiError):  # gone or conflicting: the watch brings the new state
            self._remember(plural, await self.kube.merge_patch(path + "/status", {"status": status}))


HANDLED = frozenset(
    {
        "mariadbs",
        "databases",
        "users",
        "grants",
        "rabbitmqclusters",
        "gatewayclasses",
        "gateways",
        "httproutes",
    }
)


def _gateway_refs(route: JSON) -> list[JSON]:
    return [
        ref
        for ref in route.get("spec", {}).get("parentRefs", [])
        if ref.get("kind", "Gateway") == "Gateway"
        and ref.get("group", "gateway.networking.k8s.io") == "gateway.networking.k8s.io"
    ]


def _named_parents(route: JSON) -> set[tuple[str, str]]:
    ns = route["metadata"].get("namespace", "")
    return {(ref.get("namespace", ns), ref["name"]) for ref in _gateway_refs(route)}


def _route_parents(route: JSON) -> set[tuple[str, str]]:
    """(namespace, name) of the Gateways a route names, and of those its status still lists."""
    ns = route["metadata"].get("namespace", "")
    named = _named_parents(route)
    listed = {
        (p["parentRef"].get("namespace", ns), p["parentRef"].get("name", ""))
        for p in route.get("status", {}).get("parents", [])
        if p.get("controllerName") == GATEWAY_CONTROLLER
    }
    return named | listed


def _route_backends(route: JSON) -> list[tuple[str, str]]:
    ns = route["metadata"].get("namespace", "")
    return [
        (ref.get("namespace", ns), ref["name"])
        for rule in route.get("spec", {}).get("rules", [])
        for ref in rule.get("backendRefs", [])
        if ref.get("kind", "Service") == "Service" and ref.get("group", "") in ("", "core")
    ]


def _strip_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_times(v) for k, v in value.items() if k != "lastTransitionTime"}
    if isinstance(value, list):
        return [_strip_times(v) for v in value]
    return value


def _parents_equal(a: list[JSON], b: list[JSON]) -> bool:
    return bool(_strip_times(a) == _strip_times(b))


def _owner(obj: JSON, api_version: str, kind: str) -> JSON:
    return {
        "apiVersion": obj.get("apiVersion", api_version),
        "kind": obj.get("kind", kind),
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
