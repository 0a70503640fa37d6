"""The operator as its users run it (issue 37 item 3): installed by its Helm chart, from the image
``tools/opimage`` builds, into the real-Nova tier's cluster (``make run``, the tier's tests), where
the chart's defaults place it (on the control nodes) and it reaches the compute API by its Service's
name.

The chart runs with its defaults (two replicas and leader election, its ServiceAccount and RBAC,
probes, security context and memory limit) and only these values (``chart_values``):

* ``image.repository``/``image.tag``: the image built here, imported into each real node's
  containerd (``import_image``); ``image.pullPolicy: IfNotPresent`` (the chart's default too, set so
  that no change of it makes the kubelet ask a registry these nodes do not have);
* ``extraArgs``: ``--default-image-pull-policy IfNotPresent`` (the nova images are in the nodes too:
  a tag-named image would otherwise be pulled) and then the caller's flags (``make run ARGS=...``; a
  later flag wins), each ``--flag=value`` as the chart's schema wants (``joined``); but
  ``--leader-elect=false`` becomes the chart's ``leaderElection.enabled: false`` and one replica.

``install`` runs ``helm install`` (helm from ``DEPLOYTOOLS_BIN``) with its cache, configuration and
data in the run's work directory (nothing in the user's home); ``deploy`` is the whole install into
the real-Nova tier's cluster (the CRDs, the image into every node, ``helm install``), as the tier's
tests use it. ``leader_metrics`` reads the /metrics of the pod that holds the Lease through the API
server's pod proxy (the host reaches no pod IP there).
"""

from __future__ import annotations

import pathlib
import subprocess
import time
import urllib.parse
from collections.abc import Sequence
from typing import Any

import yaml
from realnode.node import Node
from realnode.nodes import RealNodes

from simcluster.platform.controlplane import REPO
from simcluster.platform.installtools import CHART, run
from simcluster.platform.operator import leading
from simcluster.realtier.real_compute import on_every_node

CRDS = REPO / "config" / "crd"
RELEASE = "nova-operator"
NAMESPACE = "nova-system"
SELECTOR = f"app.kubernetes.io/name={RELEASE},app.kubernetes.io/instance={RELEASE}"
CONTAINER = "manager"
METRICS_SERVICE = f"{RELEASE}-metrics"
METRICS_PORT = 8080  # the chart's container port ``metrics``
DEFAULT_ARGS = ("--default-image-pull-policy=IfNotPresent",)


def joined(args: Sequence[str]) -> list[str]:
    """Flags as the chart's ``extraArgs`` takes them, each one item ``--flag`` or ``--flag=value``
    (its schema): ``make run ARGS="--log-level debug"`` becomes ``--log-level=debug``."""
    out: list[str] = []
    for arg in args:
        if arg.startswith("--") or not out or "=" in out[-1]:
            if not arg.startswith("--"):
                raise ValueError(f"a value without its flag: {arg!r}")
            out.append(arg)
        else:
            out[-1] = f"{out[-1]}={arg}"
    return out


# The operator's spellings of "no Lease" (``nova_operator.cli``); "with a Lease" is the chart's default.
WITHOUT_LEASE = frozenset({"--leader-elect=false", "--no-leader-elect"})
WITH_LEASE = frozenset({"--leader-elect", "--leader-elect=true"})


def chart_values(image_ref: str, operator_args: Sequence[str] = ()) -> dict[str, Any]:
    """The values ``make run`` installs the chart with (see the module's text).

    Leader election is the chart's to set, not a flag's: ``ARGS=--leader-elect=false`` (or
    ``--no-leader-elect``) becomes ``leaderElection.enabled: false`` with one replica, as the chart
    requires; passed through as a flag, it would have left the chart's two replicas reconciling at once."""
    repository, _, tag = image_ref.rpartition(":")
    if not repository or "/" in tag:
        raise ValueError(f"an image reference with a tag, not {image_ref!r}")
    flags = joined(operator_args)
    lease: bool | None = None
    for flag in flags:
        if flag.lower() in WITHOUT_LEASE:
            lease = False
        elif flag.lower() in WITH_LEASE:
            lease = True
    values: dict[str, Any] = {"image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"}}
    values["extraArgs"] = [*DEFAULT_ARGS, *(f for f in flags if f.lower() not in WITHOUT_LEASE | WITH_LEASE)]
    if lease is False:
        values["leaderElection"] = {"enabled": False}
        values["replicaCount"] = 1
    return values


def import_image(nodes: RealNodes, image_ref: str, archive: pathlib.Path) -> None:
    """The image's OCI archive into every node's containerd under ``image_ref``, the nodes in parallel."""
    repository = image_ref.rpartition(":")[0]

    def one(node: Node) -> list[str]:
        done = subprocess.run(
            node.ctr("images", "import", "--base-name", repository, str(archive)),
            capture_output=True,
            text=True,
        )
        return [f"{node.name}: import of {archive}: {done.stderr.strip()}"] if done.returncode else []

    on_every_node(nodes, one)


def helm_env(kubeconfig: pathlib.Path, home: pathlib.Path) -> dict[str, str]:
    return {
        "KUBECONFIG": str(kubeconfig),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }


def install(kubeconfig: pathlib.Path, workdir: pathlib.Path, values: dict[str, Any]) -> float:
    """``helm install`` of the chart with ``values`` (kept in ``workdir/helm/values.yaml``); its seconds."""
    home = workdir / "helm"
    home.mkdir(parents=True, exist_ok=True)
    values_file = home / "values.yaml"
    values_file.write_text(yaml.safe_dump(values, sort_keys=False))
    t0 = time.monotonic()
    run(
        "helm",
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "--values",
        str(values_file),
        env=helm_env(kubeconfig, home),
        timeout=300,
    )
    return time.monotonic() - t0


def deploy(
    handle: Any, image_ref: str, archive: pathlib.Path, operator_args: Sequence[str] = ()
) -> dict[str, float]:
    """The operator into the real-Nova tier of ``handle`` by its chart (``chart_values``): the CRDs,
    the image into every node, ``helm install``. Its seconds, by step."""
    assert handle.real is not None
    seconds = {}
    t = time.monotonic()
    handle.apply(CRDS)  # the chart holds the RBAC and the rest, not the CRDs
    seconds["CRDs"] = time.monotonic() - t
    t = time.monotonic()
    import_image(handle.real.real_compute.nodes, image_ref, archive)
    seconds["operator image import"] = time.monotonic() - t
    seconds["helm install"] = install(
        handle.cluster.kubeconfig, handle.workdir, chart_values(image_ref, operator_args)
    )
    return seconds


def pod_text(kube: Any, path: str) -> str:
    """A text answer of the API server (a pod's log, a proxied /metrics), whole."""
    return "\n".join(kube.lines(path))


def leader_metrics(kube: Any) -> str:
    """The /metrics text of the operator's pod that holds the Lease; ``LookupError`` when none does."""
    query = urllib.parse.urlencode({"labelSelector": SELECTOR})
    pods = kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods?{query}")["items"]
    for pod in pods:
        if (pod.get("status") or {}).get("phase") != "Running":
            continue
        name = pod["metadata"]["name"]
        text = pod_text(kube, f"/api/v1/namespaces/{NAMESPACE}/pods/{name}:{METRICS_PORT}/proxy/metrics")
        if leading(text):
            return text
    raise LookupError(f"no operator pod holds the Lease (of {[p['metadata']['name'] for p in pods]})")
