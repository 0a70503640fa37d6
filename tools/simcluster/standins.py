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

All controllers share one loop: any watch event (or a 2 s tick) triggers a full pass over the
few objects there are.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import secrets
import string
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from simcluster.asynckube import JSON, ApiError, AsyncKube, sleep_or
from simcluster.fakeopenstack import FakeOpenStack

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
# Watched collections; any event kicks a pass.
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


class StandIns:
    """Runs every stand-in controller until ``stop`` is set. Errors are logged and retried."""

    def __init__(self, kube: AsyncKube, openstack: FakeOpenStack | None = None) -> None:
        self.kube = kube
        self.openstack = openstack
        self.kick = asyncio.Event()
        self.passes = 0
        self._discovered: set[str] = set()  # uids of discover-hosts pods already acted on

    async def run(self, stop: asyncio.Event) -> None:
        paths = [*WATCHED, *([COMPUTE_PODS] if self.openstack is not None else [])]
        watchers = [asyncio.create_task(self._watch(p, stop), name=f"watch {p}") for p in paths]
        try:
            while not stop.is_set():
                self.kick.clear()
                try:
                    await self.reconcile_all()
                except ApiError as exc:  # e.g. 429 while a new CRD's storage initialises
                    log.info("stand-in pass retried: %s", exc)
                    await asyncio.sleep(0.3)
                except Exception:  # a stand-in must keep going; the log tells why
                    log.exception("stand-in pass failed")
                    await asyncio.sleep(0.5)
                self.passes += 1
                await sleep_or(self.kick, 2.0)
                if stop.is_set():
                    break
        finally:
            for w in watchers:
                w.cancel()
            for w in watchers:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await w

    async def _watch(self, path: str, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                async for _event in self.kube.watch(path, timeout_seconds=50):
                    self.kick.set()
            except asyncio.CancelledError:
                raise
            except Exception:  # CRD not installed yet, apiserver restarting, ...
                await asyncio.sleep(1.0)

    async def reconcile_all(self) -> None:
        await self.mariadb()
        await self.rabbitmq()
        await self.gateway()
        if self.openstack is not None:
            await self.compute_agent(self.openstack)

    # -- what nova-compute and discover_hosts do to the fake Nova API -----------------------

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

    async def mariadb(self) -> None:
        clusters = {
            (m["metadata"]["namespace"], m["metadata"]["name"]): m
            for m in await self._list_mariadb("mariadbs")
        }
        for m in clusters.values():
            if m["metadata"].get("deletionTimestamp"):
                continue
            replicas = m.get("spec", {}).get("replicas", 1)
            status = {
                "conditions": [condition("Ready", True, "StatefulSetReady", "Running")],
                "currentPrimary": f"{m['metadata']['name']}-0",
                "currentPrimaryPodIndex": 0,
                "replicas": replicas,
            }
            await self._write_status(f"{MARIADB}", "mariadbs", m, status)

        users = await self._list_mariadb("users")
        for plural in ("databases", "users", "grants"):
            objs = users if plural == "users" else await self._list_mariadb(plural)
            for obj in objs:
                if await self._finalize(MARIADB, plural, obj):
                    continue
                ref = obj.get("spec", {}).get("mariaDbRef", {})
                ns = ref.get("namespace") or obj["metadata"]["namespace"]
                if not is_ready(clusters.get((ns, ref.get("name", "")))):
                    continue  # the real controller waits (waitForIt) and reports nothing useful yet
                if plural == "users" and not await self._password_present(obj):
                    continue
                if plural == "grants" and not self._grant_user_ready(obj, users):
                    continue
                await self._write_status(
                    MARIADB, plural, obj, {"conditions": [condition("Ready", True, "Created", "Created")]}
                )

    async def _list_mariadb(self, plural: str) -> list[JSON]:
        try:
            return await self.kube.list(f"{MARIADB}/{plural}")
        except ApiError as exc:
            if exc.status == 404:
                return []
            raise

    async def _finalize(self, base: str, plural: str, obj: JSON) -> bool:
        """Add the real controller's finalizer; on deletion remove it. True when the object is going away."""
        fin = FINALIZERS[plural]
        finalizers = list(obj["metadata"].get("finalizers", []))
        path = _path(base, plural, obj)
        if obj["metadata"].get("deletionTimestamp"):
            if fin in finalizers:
                finalizers.remove(fin)
                await self._patch_meta(path, obj, finalizers)
            return True
        if fin not in finalizers:
            await self._patch_meta(path, obj, [*finalizers, fin])
        return False

    async def _patch_meta(self, path: str, obj: JSON, finalizers: list[str]) -> None:
        rv = obj["metadata"]["resourceVersion"]
        with contextlib.suppress(ApiError):  # conflict or gone: the next pass sees the new state
            await self.kube.merge_patch(path, {"metadata": {"finalizers": finalizers, "resourceVersion": rv}})

    async def _password_present(self, user: JSON) -> bool:
        ref = user.get("spec", {}).get("passwordSecretKeyRef")
        if not ref:
            return True
        secret = await self.kube.get(
            f"/api/v1/namespaces/{user['metadata']['namespace']}/secrets/{ref.get('name', '')}"
        )
        return bool(secret and (secret.get("data") or {}).get(ref["key"]))

    @staticmethod
    def _grant_user_ready(grant: JSON, users: list[JSON]) -> bool:
        ns, username = grant["metadata"]["namespace"], grant.get("spec", {}).get("username")
        return any(
            u["metadata"]["namespace"] == ns
            and (u.get("spec", {}).get("name") or u["metadata"]["name"]) == username
            and is_ready(u)
            for u in users
        )

    # -- RabbitMQ cluster operator -----------------------------------------------------------

    async def rabbitmq(self) -> None:
        try:
            clusters = await self.kube.list(f"{RABBIT}/rabbitmqclusters")
        except ApiError as exc:
            if exc.status == 404:
                return
            raise
        for rmq in clusters:
            meta = rmq["metadata"]
            if await self._finalize(RABBIT, "rabbitmqclusters", rmq):
                continue
            ns, name = meta["namespace"], meta["name"]
            secret_name = f"{name}-default-user"
            if await self.kube.get(f"/api/v1/namespaces/{ns}/secrets/{secret_name}") is None:
                await self._create_default_user(rmq, secret_name)
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
                "ownerReferences": [_owner(rmq)],
            },
            "type": "Opaque",
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
        }
        with contextlib.suppress(ApiError):  # AlreadyExists after a race: fine
            await self.kube.create(f"/api/v1/namespaces/{ns}/secrets", body)

    # -- Gateway API -------------------------------------------------------------------------

    async def gateway(self) -> None:
        try:
            classes = await self.kube.list(f"{GATEWAY}/gatewayclasses")
        except ApiError as exc:
            if exc.status == 404:
                return
            raise
        ours = {
            c["metadata"]["name"]
            for c in classes
            if c.get("spec", {}).get("controllerName") == GATEWAY_CONTROLLER
        }
        for gc in classes:
            if gc["metadata"]["name"] in ours:
                gen = gc["metadata"].get("generation")
                conds = [
                    condition("Accepted", True, "Accepted", "", gen),
                    condition("SupportedVersion", True, "SupportedVersion", "", gen),
                ]
                await self._write_status(
                    GATEWAY, "gatewayclasses", gc, {"conditions": conds}, cluster_scoped=True
                )
        gateways = {
            (g["metadata"]["namespace"], g["metadata"]["name"]): g
            for g in await self.kube.list(f"{GATEWAY}/gateways")
            if g.get("spec", {}).get("gatewayClassName") in ours
        }
        routes = await self.kube.list(f"{GATEWAY}/httproutes")
        attached: dict[tuple[str, str], int] = {}
        for route in routes:
            await self._route(route, gateways, attached)
        for (_ns, _name), gw in gateways.items():
            await self._gateway_status(gw, attached.get((_ns, _name), 0))

    async def _route(
        self, route: JSON, gateways: dict[tuple[str, str], JSON], attached: dict[tuple[str, str], int]
    ) -> None:
        meta, spec = route["metadata"], route.get("spec", {})
        if meta.get("deletionTimestamp"):
            return
        gen = meta.get("generation")
        missing = []
        for rule in spec.get("rules", []):
            for ref in rule.get("backendRefs", []):
                if ref.get("kind", "Service") != "Service" or ref.get("group", "") not in ("", "core"):
                    continue
                svc_ns = ref.get("namespace", meta["namespace"])
                if await self.kube.get(f"/api/v1/namespaces/{svc_ns}/services/{ref['name']}") is None:
                    missing.append(f"{svc_ns}/{ref['name']}")
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
        for ref in spec.get("parentRefs", []):
            if (
                ref.get("kind", "Gateway") != "Gateway"
                or ref.get("group", "gateway.networking.k8s.io") != "gateway.networking.k8s.io"
            ):
                continue
            key = (ref.get("namespace", meta["namespace"]), ref["name"])
            if key not in gateways:
                continue  # not a Gateway of ours: another controller (or none) answers for it
            attached[key] = attached.get(key, 0) + 1
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
            await self.kube.merge_patch(
                _path(GATEWAY, "httproutes", route) + "/status", {"status": {"parents": parents}}
            )

    async def _gateway_status(self, gw: JSON, routes: int) -> None:
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
        with contextlib.suppress(ApiError):  # gone or conflicting: the next pass retries
            await self.kube.merge_patch(path + "/status", {"status": status})


def _strip_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_times(v) for k, v in value.items() if k != "lastTransitionTime"}
    if isinstance(value, list):
        return [_strip_times(v) for v in value]
    return value


def _parents_equal(a: list[JSON], b: list[JSON]) -> bool:
    return bool(_strip_times(a) == _strip_times(b))


def _owner(obj: JSON) -> JSON:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
