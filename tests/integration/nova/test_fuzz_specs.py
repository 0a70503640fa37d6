"""Issue 13 fuzz tier: generated hostile specs are refused by the API server or end in conditions.

Hypothesis generates Nova and NovaCompute specs with hostile strings (path traversal, ``/``,
``%``, blanks, newlines, ``$``, upper case, overlong, ...) in every name, reference, label,
annotation and extraConfig field. Each goes to the real API server: a refusal must be a 422;
an admitted spec is reconciled by both controllers (running under the operator's RBAC) and
must end with a Ready condition for its generation, with no reconcile error (an error is a
traceback in the log). Every request the operator sends stays in the CR's namespace.

The example budget is fixed and the generation derandomized: the same specs on every run.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from simcluster import ControlPlane

from nova_operator.kube import Kube
from nova_operator.kube.errors import Invalid, KubeError
from nova_operator.kube.resources import NOVACOMPUTES, NOVAS
from nova_operator.metrics import Metrics
from nova_operator.reconcilers.compute.context import ComputeSettings
from nova_operator.reconcilers.compute.controller import factory_with
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.reconcilers.nova.controller import make_controller_factory
from nova_operator.runtime.manager import Manager
from nova_operator.settings import LeaderElectionSettings, ServerSettings, Settings, WatchSettings
from tests.integration.nova.inputs import RecordingKube, cond, create_inputs, nova_body

from .conftest import ok_probe  # type: ignore[import-not-found]

pytestmark = pytest.mark.integration

NOVA_EXAMPLES = 80
COMPUTE_EXAMPLES = 40

HOSTILE = [
    "..",
    ".",
    "../../victim-ns/secrets/prod",
    "../../../../../../api/v1/namespaces/kube-system/secrets/x",
    "a/b",
    "%2e%2e",
    "a%2Fb",
    "",
    " ",
    "UPPER",
    "x" * 300,
    "a\nb",
    "$(id)",
    "${DEFAULT.host}",
    "back\\slash",
    "é",
    "-lead",
    "trail-",
    "a..b",
    "kube-system",
    "example.org/key",
    "ok-name",
]
hostile = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(alphabet=st.sampled_from("aZ09-._/%:=$\\ \n@#"), min_size=1, max_size=12),
    # plausible names too, so that admitted specs (with the rest hostile) reach the reconcilers
    st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True),
    st.from_regex(r"[a-z]{1,8}\.example\.org/[a-z][a-z0-9_.-]{0,6}[a-z]", fullmatch=True),
)

NOVA_FIELDS: dict[str, Any] = {
    "messaging.clusterRef.name": "str",
    "apiDatabase.clusterRef.name": "str",
    "database.clusterRef.name": "str",
    "cache.clusterRef.name": "str",
    "apiDatabase.secretRef.name": "str",
    "database.secretRef.name": "str",
    "database.secretRef.key": "str",
    "serviceUser.secretRef.name": "str",
    "serviceUser.secretRef.key": "str",
    "metadata.sharedSecretRef.name": "str",
    "metadata.sharedSecretRef.key": "str",
    "scheduler.deployment.nodeSelector": "label",
    "scheduler.deployment.priorityClassName": "str",
    "metadata.gateway.parentRef.sectionName": "gateway",
    "secretStoreRef.name": "str",
    "api.deployment.nodeSelector": "label",
    "jobs.priorityClassName": "str",
    "gateway.parentRef.name": "gateway",
    "gateway.parentRef.namespace": "gateway",
    "gateway.annotations": "annotation",
    "networkPolicy.ingress": "policy",
    "extraConfig": "extra",
    "dbArchive.schedule": "str",
}
COMPUTE_FIELDS: dict[str, Any] = {
    "novaRef.name": "str",
    "nodeSelector": "label",
    "extraConfig": "extra",
    "image.repository": "str",
    "libvirt.cpuModels": "list",
}


def _set(spec: dict[str, Any], dotted: str, kind: str, value: str) -> None:
    *parents, leaf = dotted.split(".")
    if kind == "gateway":
        block = spec.setdefault(parents[0], {}) if parents[0] != "gateway" else spec
        block.setdefault("gateway", {"hostname": "nova.example.org", "parentRef": {"name": "gw"}})
    node = spec
    for part in parents:
        node = node.setdefault(part, {})
    if kind == "label":
        node[leaf] = {value: value}
    elif kind == "annotation":
        spec.setdefault("gateway", {"hostname": "nova.example.org", "parentRef": {"name": "gw"}})
        spec["gateway"]["annotations"] = {value: "v"}
    elif kind == "policy":
        node[leaf] = [{"namespaceSelector": {"matchLabels": {value: value}}}]
    elif kind == "list":
        node[leaf] = [value]
    elif kind == "extra":
        node[leaf] = {value: {value: value}}
    else:
        node[leaf] = value


def _examples(fields: dict[str, Any], count: int) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.dictionaries(st.sampled_from(sorted(fields)), hostile, min_size=1, max_size=3))
    def collect(example: dict[str, str]) -> None:
        found.append(example)

    collect()
    return found


def _compute(name: str, example: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"novaRef": {"name": "nova-0"}, "nodeSelector": {"example.org/pool": "a"}}
    for dotted, value in example.items():
        _set(spec, dotted, COMPUTE_FIELDS[dotted], value)
    return {
        "apiVersion": NOVACOMPUTES.api_version,
        "kind": "NovaCompute",
        "metadata": {"name": name},
        "spec": spec,
    }


def _nova(name: str, example: dict[str, str]) -> dict[str, Any]:
    body = nova_body(name)
    for dotted, value in example.items():
        _set(body["spec"], dotted, NOVA_FIELDS[dotted], value)
    return body


@pytest.fixture
async def both_controllers(
    nova_cluster: ControlPlane, namespace: str
) -> AsyncIterator[tuple[Manager, RecordingKube]]:
    kube = await RecordingKube.connect(
        kubeconfig=str(nova_cluster.kubeconfig), context="operator", metrics=Metrics()
    )
    kube.sent = []
    kube.timeout = 10
    settings = Settings(
        watch=WatchSettings(
            namespaces=(namespace,),
            backoff_initial=0.05,
            backoff_max=0.5,
            resync_period=None,
            sync_timeout=20,
        ),
        leader_election=LeaderElectionSettings(enabled=False),
        servers=ServerSettings(metrics_bind_address="0", health_probe_bind_address="0"),
        shutdown_timeout=5,
    )
    manager = Manager(kube, settings)
    make_controller_factory(
        NovaOptions(operator_namespace="nova-system", prober=ok_probe, stale_services=False)
    )(manager)
    manager.add_controller(factory_with(ComputeSettings(request_timeout=1.0))(manager))
    task = asyncio.create_task(manager.run(), name="manager")
    try:
        async with asyncio.timeout(20):
            await asyncio.gather(*(inf.wait_for_sync() for inf in manager.informers))
        yield manager, kube
    finally:
        manager.stop()
        await task
        await kube.close()


def _errors(metrics: Metrics) -> dict[str, float]:
    out = {}
    for metric in metrics.reconcile_errors.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.value:
                out[sample.labels["controller"]] = sample.value
    return out


async def test_hostile_specs_are_refused_or_end_in_conditions_within_their_namespace(
    admin: Kube, both_controllers: tuple[Manager, RecordingKube], namespace: str
) -> None:
    _, kube = both_controllers
    await create_inputs(admin, namespace)  # the referenced Secrets and MariaDB: passes go past the gates
    admitted: list[tuple[Any, str]] = []
    refused = 0
    cases = [(NOVAS, _nova(f"nova-{i}", e)) for i, e in enumerate(_examples(NOVA_FIELDS, NOVA_EXAMPLES))]
    cases += [
        (NOVACOMPUTES, _compute(f"pool-{i}", e))
        for i, e in enumerate(_examples(COMPUTE_FIELDS, COMPUTE_EXAMPLES))
    ]
    for ref, body in cases:
        try:
            await admin.create(ref, copy.deepcopy(body), namespace)
        except Invalid:
            refused += 1
            continue
        except KubeError as exc:
            raise AssertionError(f"{json.dumps(body['spec'])[:300]}: HTTP {exc.status} {exc}") from None
        admitted.append((ref, body["metadata"]["name"]))
    print(f"fuzz: {len(cases)} specs, {refused} refused by the API server, {len(admitted)} admitted")
    assert admitted, "every generated spec was refused: the fuzz reaches no reconcile"

    async def settled() -> list[str]:
        pending = []
        for ref, name in admitted:
            obj = await admin.get(ref, name, namespace)
            ready = cond(obj, "Ready")
            if ready.get("observedGeneration") != obj["metadata"]["generation"]:
                pending.append(f"{ref.kind} {name}: {json.dumps(obj.get('status'))[:200]}")
        return pending

    try:
        async with asyncio.timeout(90):
            while await settled():  # noqa: ASYNC110 - polling the API server, no event to await
                await asyncio.sleep(0.5)
    except TimeoutError:
        raise AssertionError("\n".join(await settled())) from None
    assert _errors(kube.metrics) == {}, "a reconcile raised (a traceback in the log)"

    cluster_wide = ("/version", "/api/v1/nodes", "/apis/gateway.networking.k8s.io/", "/apis/k8s.mariadb.com/")
    cluster_wide += ("/apis/external-secrets.io/v1/clustersecretstores/",)
    outside = []
    for method, path in kube.sent:
        parts = path.split("/")
        if "namespaces" in parts:
            if parts[parts.index("namespaces") + 1] != namespace:
                outside.append((method, path))
        elif not path.startswith(cluster_wide):
            outside.append((method, path))
        if ".." in parts or "" in parts[1:]:
            outside.append((method, path))
    assert outside == [], outside
