"""What `kubectl` shows of the generated CRDs on the real API server: explain, categories, columns."""

from __future__ import annotations

import pathlib
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from simcluster import ControlPlane
from simcluster.platform.installtools import ToolError, run

if TYPE_CHECKING:
    from conftest import Objects

pytestmark = pytest.mark.integration
SAMPLES = pathlib.Path(__file__).resolve().parents[3] / "config" / "samples"


def _kubectl(plane: ControlPlane, cache: pathlib.Path, *args: str) -> str:
    return run(
        "kubectl", f"--kubeconfig={plane.kubeconfig}", "--context=admin", f"--cache-dir={cache}", *args
    )


def _explain(plane: ControlPlane, cache: pathlib.Path, path: str) -> str:
    # The API server publishes a new CRD's OpenAPI a moment after it is Established.
    deadline = time.monotonic() + 30
    while True:
        try:
            return _kubectl(plane, cache, "explain", path)
        except ToolError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _words(text: str) -> str:
    return " ".join(text.split())


def test_kubectl_explain_reads_like_documentation(crds: ControlPlane, tmp_path: pathlib.Path) -> None:
    out = _words(_explain(crds, tmp_path, "nova.spec.api.deployment"))
    assert "The compute API Deployment {name}; also the placement fallback of spec.jobs." in out
    assert "replicas <integer> Number of pods." in out
    assert "terminationGracePeriodSeconds <integer> Seconds a pod gets to stop after SIGTERM" in out
    assert "affinity <Object> Node affinity and pod (anti-)affinity scheduling rules of the pods." in out

    out = _words(_explain(crds, tmp_path, "nova.spec.jobs.affinity.podAntiAffinity"))
    assert "requiredDuringSchedulingIgnoredDuringExecution <[]Object>" in out
    assert "If the anti-affinity requirements specified by this field are not met" in out

    out = _words(_explain(crds, tmp_path, "novacompute.spec.nodeSelector"))
    assert "Label pairs that pick the pool's nodes" in out

    # issue 38 items 2, 4 and 6
    out = _words(_explain(crds, tmp_path, "nova.spec.image"))
    assert "pullSecrets <[]Object> Secrets with the registry's credentials, rendered as" in out
    enum = "pullPolicy <string> enum: Always, IfNotPresent, Never imagePullPolicy of"
    assert f"{enum} every container" in out
    out = _words(_explain(crds, tmp_path, "novacompute.spec"))
    assert "terminationGracePeriodSeconds <integer> Seconds a nova-compute pod gets to stop" in out
    out = _words(_explain(crds, tmp_path, "novacompute.spec.image"))
    assert "repository <string> OCI repository of the nova-compute image" in out
    assert f"{enum} the pool's containers" in out
    out = _words(_explain(crds, tmp_path, "nova.spec.metadata.deployment.probes"))
    assert "liveness <Object> Timing of the liveness probe." in out
    out = _words(_explain(crds, tmp_path, "nova.spec.scheduler.deployment.probes"))
    assert "readiness <Object> Timing of the readiness probe." in out
    assert "liveness" not in out
    out = _words(_explain(crds, tmp_path, "nova.spec.api.deployment.probes.readiness"))
    assert "successThreshold <integer> Successful runs in a row after a failure" in out

    # issue 38 item 1
    out = _words(_explain(crds, tmp_path, "nova.spec.tls"))
    assert "caBundleSecretRef <Object> -required- Secret whose key (default ca.crt) holds the PEM CA" in out
    out = _words(_explain(crds, tmp_path, "novacompute.spec.tls.caBundleSecretRef"))
    assert "key <string> Data key holding the PEM bundle. Default: ca.crt." in out

    out = _words(_explain(crds, tmp_path, "nova.status.upgradePhase"))
    assert "Expanding, Migrating, RollingUpdate or Contracting while an upgrade runs" in out


def _sample(name: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    body["metadata"].pop("namespace", None)
    return body


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_kubectl_get_category_short_names_and_wide_columns(
    objects: Objects, crds: ControlPlane, tmp_path: pathlib.Path
) -> None:
    nova = await objects.create("novas", _sample("nova_minimal.yaml"))
    nova["status"] = {
        "installedRelease": "2025.1",
        "targetRelease": "2025.2",
        "upgradePhase": "Migrating",
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "NotAllReady",
                "message": "DatabaseReady is False",
                "lastTransitionTime": _now(),
            }
        ],
    }
    await objects.replace_status("novas", nova)
    await objects.create("novacomputes", _sample("novacompute.yaml"))
    ns = f"--namespace={objects.namespace}"

    names = _kubectl(crds, tmp_path, "get", "openstack", ns, "-o", "name").split()
    assert sorted(names) == [
        "nova.nova.openstack.c5c3.io/nova",
        "novacompute.nova.openstack.c5c3.io/rack7",
    ]

    header, row = _kubectl(crds, tmp_path, "get", "nv", ns).splitlines()
    assert header.split() == ["NAME", "READY", "REASON", "RELEASE", "ENDPOINT", "UP", "DOWN", "AGE"]
    assert row.split()[:4] == ["nova", "False", "NotAllReady", "2025.1"]

    header, row = _kubectl(crds, tmp_path, "get", "nv", ns, "-o", "wide").splitlines()
    wide = ["NAME", "READY", "REASON", "RELEASE", "ENDPOINT", "UP", "DOWN", "AGE", "PHASE", "TARGET"]
    assert header.split() == wide
    assert row.split()[-2:] == ["Migrating", "2025.2"]

    header, _ = _kubectl(crds, tmp_path, "get", "nvc", ns).splitlines()
    # one word per column: a blank inside a name would split it in two for awk and cut
    assert header.split() == ["NAME", "READY", "REASON", "DESIRED", "READY-PODS", "AGE"]


def test_the_crds_apply_client_side_as_make_install_does(crds: ControlPlane, tmp_path: pathlib.Path) -> None:
    # kubectl writes the whole CRD into the last-applied annotation, which the API server caps at
    # 256 KiB: the vendored affinity schema (six copies in the Nova CRD) must leave room for it.
    out = _kubectl(crds, tmp_path, "apply", "--dry-run=server", "-k", str(SAMPLES.parent / "crd"))
    assert "novas.nova.openstack.c5c3.io" in out
    assert "novacomputes.nova.openstack.c5c3.io" in out


async def test_affinity_is_typed_and_pruned_by_the_api_server(objects: Objects) -> None:
    from kubernetes_asyncio.client.exceptions import ApiException

    required = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
    }
    nova = _sample("nova_minimal.yaml")
    nova["spec"]["api"] = {
        "deployment": {
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
        }
    }
    nova["spec"]["api"]["deployment"]["affinity"]["nodeAfinity"] = {"typo": True}
    created = await objects.create("novas", nova)
    assert created["spec"]["api"]["deployment"]["affinity"] == {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
    }

    bad = _sample("nova_minimal.yaml")
    bad["metadata"]["name"] = "bad"
    bad["spec"]["jobs"] = {
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": "heavy", "podAffinityTerm": {"topologyKey": "zone"}}
                ]
            }
        }
    }
    with pytest.raises(ApiException) as refused:
        await objects.create("novas", bad)
    assert refused.value.status == 422
    assert "spec.jobs.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight" in (
        refused.value.body
    )
