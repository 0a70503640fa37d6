"""A NovaCompute pass over the real API server, for step tests (a helper module, not a test module).

A pass as the controller builds one, for one step: the pool and its Nova are stored by
kube-apiserver (uid, generation, creationTimestamp and deletionTimestamp are the server's), every
input a step reads is stored there too, and the step's client is the real one wrapped by ``Calls``
(which records what was sent and can refuse a request the test cannot provoke from the server;
every other answer is kube-apiserver's). The compute API stays a double (``tests.compute_api``).
"""

from __future__ import annotations

import base64
import contextlib
import pathlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import yaml

from nova_operator.decisions.nodeplan import Plan
from nova_operator.kube import Kube, errors
from nova_operator.kube.resources import (
    DEPLOYMENTS,
    JOBS,
    NODES,
    NOVACOMPUTES,
    NOVAS,
    PODS,
    SECRETS,
    ResourceRef,
)
from nova_operator.kube.types import Object
from nova_operator.metrics import Metrics
from nova_operator.models.novacompute import NovaCompute
from nova_operator.reconcilers.compute.context import DRAIN_FINALIZER, ComputePass, ComputeSettings
from nova_operator.renderers import compute_pool
from tests.compute_api import FakeCompute

ROOT = pathlib.Path(__file__).resolve().parents[3]
NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
CONTRACT = "nova-compute-config"
KEY_SECRET = "nova-digest-key"
SERVICE_USER = "nova-service-user"  # the sample Nova's spec.serviceUser.secretRef


class Emitted:
    """An event sink recording (type, reason, message): the steps' events, without the Events API."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, str]] = []

    async def emit(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.emitted.append((type_, reason, message))

    def reasons(self) -> list[str]:
        return [r for _, r, _ in self.emitted]


class Calls(Kube):
    """The real client over ``kube``'s connection, recording each call a step makes (``sent``: verb,
    resource plural, name or namespace, label selector) and the bodies it created and applied.
    ``refuse[(verb, plural)]`` answers that call with the error, unsent (a failure the test cannot
    provoke from the server: an etcd timeout, an unreachable server); nothing else is changed."""

    sent: list[tuple[str, str, str, str]]
    created: list[Object]
    applied: list[Object]
    refuse: dict[tuple[str, str], errors.KubeError]

    @classmethod
    def of(cls, kube: Kube) -> Calls:
        wrapped = cls(kube._api, metrics=Metrics(), timeout=kube.timeout)
        wrapped.sent, wrapped.created, wrapped.applied, wrapped.refuse = [], [], [], {}
        return wrapped

    async def close(self) -> None:  # the wrapped client owns the connection
        pass

    def _record(self, verb: str, ref: ResourceRef, name: str, selector: str = "") -> None:
        self.sent.append((verb, ref.plural, name, selector))
        if (refused := self.refuse.get((verb, ref.plural))) is not None:
            raise refused

    def of_verb(self, verb: str, plural: str) -> list[tuple[str, str, str, str]]:
        return [c for c in self.sent if c[0] == verb and c[1] == plural]

    def deleted(self) -> list[tuple[str, str]]:
        return [(plural, name) for verb, plural, name, _ in self.sent if verb == "delete"]

    async def get(self, ref: ResourceRef, name: str, namespace: str | None = None) -> Object:
        self._record("get", ref, name)
        return await super().get(ref, name, namespace)

    async def list(self, ref: ResourceRef, namespace: str | None = None, **kw: Any) -> Object:
        self._record("list", ref, namespace or "", kw.get("label_selector") or "")
        return await super().list(ref, namespace, **kw)

    async def create(self, ref: ResourceRef, body: Mapping[str, Any], namespace: str | None = None) -> Object:
        self._record("create", ref, body["metadata"]["name"])
        live = await super().create(ref, body, namespace)
        self.created.append(live)
        return live

    async def apply(self, ref: ResourceRef, body: Mapping[str, Any], **kw: Any) -> Object:
        self._record("apply", ref, body["metadata"]["name"])
        live = await super().apply(ref, body, **kw)
        self.applied.append(dict(body))
        return live

    async def delete(self, ref: ResourceRef, name: str, namespace: str | None = None, **kw: Any) -> None:
        self._record("delete", ref, name)
        await super().delete(ref, name, namespace, **kw)


def encoded(**data: str) -> dict[str, str]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}


class Stage:
    """One test's namespace on the real API server: what it stores there, and passes over it."""

    def __init__(self, admin: Kube, namespace: str) -> None:
        self.admin, self.ns = admin, namespace
        self.kube = Calls.of(admin)
        self._nodes: list[str] = []

    # -- stored inputs -------------------------------------------------------------------

    async def put(self, ref: ResourceRef, body: Mapping[str, Any]) -> Object:
        """``body`` created on the server (in the namespace when namespaced), as the server answered."""
        ns = self.ns if ref.namespaced else None
        meta = {**body["metadata"], **({"namespace": ns} if ns else {})}
        return await self.admin.create(ref, {**body, "metadata": meta}, ns)

    async def status(self, ref: ResourceRef, name: str, status: Mapping[str, Any]) -> Object:
        return await self.admin.patch_status(ref, name, {"status": dict(status)}, self.ns)

    async def secret(self, name: str, data: Mapping[str, str] | None = None, **values: str) -> Object:
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}}
        return await self.put(
            SECRETS, {**body, "data": dict(data) if data is not None else encoded(**values)}
        )

    async def nova(
        self,
        *,
        release: str | None = "2025.2",
        ref: bool = True,
        password: str | None = "pw",
        spec: Mapping[str, Any] | None = None,
    ) -> Object:
        """The sample Nova (``spec`` laid over its spec) with ``release`` installed and its compute
        contract published (``ref``), and its service-user Secret holding ``password`` ("" an empty
        Secret, None none at all); the server's copy, as the NovaRef step hands it forward."""
        body: Object = yaml.safe_load((ROOT / "config" / "samples" / "nova_minimal.yaml").read_text())
        body["metadata"] = {"name": "nova"}
        body["spec"].update(spec or {})
        nova = await self.put(NOVAS, body)
        status: Object = {"installedRelease": release} if release else {}
        if ref:
            status["computeConfigSecretRef"] = {"name": CONTRACT}
        if status:
            nova = await self.status(NOVAS, "nova", status)
        if password is not None:
            await self.secret(SERVICE_USER, encoded(password=password) if password else {})
        return nova

    async def pool_inputs(self) -> None:
        """A complete compute contract and the Nova's digest key (what PoolConfig reads)."""
        await self.secret(CONTRACT, encoded(**dict.fromkeys(compute_pool.REQUIRED_CONTRACT_KEYS, "x")))
        await self.secret(KEY_SECRET, key="k" * 64)

    async def pool(
        self,
        name: str = "pool",
        *,
        selector: str = "a",
        deleting: bool = False,
        nodes: list[Object] | None = None,
        **spec: Any,
    ) -> Object:
        """A NovaCompute of the Nova ``nova`` selecting ``pool=<selector>``, as the server holds it;
        ``deleting``: deleted while a finalizer holds it (the server sets its deletionTimestamp);
        ``nodes``: its status ledger (written to the status subresource)."""
        meta: Object = {"name": name}
        if deleting:
            meta["finalizers"] = [DRAIN_FINALIZER]  # what holds a pool in production
        cr = await self.put(
            NOVACOMPUTES,
            {
                "apiVersion": NOVACOMPUTES.api_version,
                "kind": "NovaCompute",
                "metadata": meta,
                "spec": {"novaRef": {"name": "nova"}, "nodeSelector": {"pool": selector}, **spec},
            },
        )
        if nodes is not None:
            cr = await self.status(NOVACOMPUTES, name, {"nodes": nodes})
        if deleting:
            await self.admin.delete(NOVACOMPUTES, name, self.ns)
            cr = await self.admin.get(NOVACOMPUTES, name, self.ns)
        return cr

    def node_name(self, short: str) -> str:
        return f"{self.ns}-{short}"

    async def node(self, short: str, labels: Mapping[str, str] | None = None) -> str:
        """A Node (cluster-scoped: named after the namespace, deleted when the test ends)."""
        name = self.node_name(short)
        await self.put(
            NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
        )
        self._nodes.append(name)
        return name

    async def pod(self, node: str, phase: str = "Running", pool: str = "pool") -> Object:
        """A pod of ``pool`` bound to ``node``, in ``phase`` (as the kubelet would report it)."""
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{pool}-{node}", "labels": compute_pool.selector_labels(pool)},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
        }
        await self.put(PODS, body)
        return await self.status(PODS, f"{pool}-{node}", {"phase": phase})

    async def api_deployment(self, config_map: str | None = "nova-config-abc") -> Object:
        """The Nova API Deployment (its image, and the config it mounts, the discovery Job copies)."""
        volumes = [{"name": "config", "configMap": {"name": config_map}}] if config_map else []
        labels = {"app": "nova-api"}
        body = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "nova"},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [{"name": "api", "image": "ghcr.io/c5c3/nova:2025.2"}],
                        "volumes": volumes,
                    },
                },
            },
        }
        return await self.put(DEPLOYMENTS, body)

    async def job(
        self, name: str, *, owner: Object | None, labels: Mapping[str, str] | None = None
    ) -> Object:
        """A Job (of ``owner`` as its controller, when given) that has not finished."""
        meta: Object = {"name": name, "labels": dict(labels or {})}
        if owner is not None:
            o = owner["metadata"]
            meta["ownerReferences"] = [
                {
                    "apiVersion": owner["apiVersion"],
                    "kind": owner["kind"],
                    "name": o["name"],
                    "uid": o["uid"],
                    "controller": True,
                }
            ]
        template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}
        body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"template": template}}
        return await self.put(JOBS, body)

    async def job_ended(self, name: str, condition: str, at: str) -> Object:
        """The Job's terminal ``condition`` (Complete or Failed) at ``at``, after the criterion the
        server asks for first since 1.33 (SuccessCriteriaMet, FailureTarget)."""
        if condition == "Complete":
            first, reason, message = (
                "SuccessCriteriaMet",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            )
            counts: Object = {"completionTime": at, "succeeded": 1}
        else:
            first, reason, message = "FailureTarget", "BackoffLimitExceeded", "BackoffLimitExceeded"
            counts = {"failed": 1}
        conds = [
            {"type": t, "status": "True", "reason": reason, "message": message}
            | {"lastTransitionTime": at, "lastProbeTime": at}
            for t in (first, condition)
        ]
        return await self.status(JOBS, name, {"startTime": at, "conditions": conds, **counts})

    # -- passes ----------------------------------------------------------------------------

    def pass_over(
        self,
        cr: Object,
        *,
        compute: FakeCompute | None = None,
        nova: Object | None = None,
        siblings: list[Object] | None = None,
        plan: Plan | None = None,
        now: datetime = NOW,
        settings: ComputeSettings | None = None,
    ) -> tuple[ComputePass, Emitted]:
        """A pass over the stored ``cr`` (its status ledger as the server holds it), on the recording
        client; ``nova``: the Nova the NovaRef step handed forward; ``siblings``: the pools index."""
        events = Emitted()
        p = ComputePass(
            kube=self.kube,
            events=events,
            settings=settings or ComputeSettings(),
            cr=cr,
            pool=NovaCompute.model_validate(cr),
            status={"nodes": [dict(n) for n in (cr.get("status") or {}).get("nodes") or []]},
            pools=lambda ns, nova_name: list(siblings or []),
            plan=plan,
            nova=nova,
            now=now,
        )
        p._client = compute if compute is not None else FakeCompute()  # type: ignore[assignment]
        return p, events

    async def ledger_pass(
        self, nodes: list[Object], compute: FakeCompute | None = None, **kw: Any
    ) -> tuple[ComputePass, Emitted]:
        """A pass (``pass_over`` with ``kw``) over a fresh pool ``pool`` whose status holds ``nodes``."""
        return self.pass_over(await self.pool(nodes=nodes), compute=compute, **kw)

    # -- the end of the test ---------------------------------------------------------------

    async def clear(self) -> None:
        """The test's NovaComputes and Novas are deleted (finalizers released) and its Nodes too: the
        bare control plane has no namespace controller, and a later cluster-wide controller would
        otherwise reconcile them."""
        for ref in (NOVACOMPUTES, NOVAS):
            with contextlib.suppress(errors.KubeError):
                for obj in (await self.admin.list(ref, self.ns)).get("items") or []:
                    name = obj["metadata"]["name"]
                    with contextlib.suppress(errors.KubeError):
                        if obj["metadata"].get("finalizers"):
                            await self.admin.patch(ref, name, {"metadata": {"finalizers": None}}, self.ns)
                        await self.admin.delete(ref, name, self.ns)
        for name in self._nodes:
            with contextlib.suppress(errors.NotFound):
                await self.admin.delete(NODES, name)
