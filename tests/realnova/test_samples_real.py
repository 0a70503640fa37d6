"""The samples through the real Nova: the operator as its own process on the real-Nova tier.

db-sync runs the real ``nova-manage`` against MariaDB, the five Deployments turn Available by their
real probes (``nova-amqp-ready`` against the real broker, httpGet on the API and the console page),
the NovaCompute sample pool runs nova-compute with the fake driver on two stand-in nodes, and the
compute API, reached through Keystone's token, lists a service row per replica under its pod's name.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
from simcluster import SimHandle
from simcluster.controlplane import REPO
from simcluster.realtier import launch_real

from tests.realnova.realcluster import (
    NAMESPACE,
    POOL_LABELS,
    SAMPLES,
    OpenStackClient,
    compute_url,
    http_status,
    is_ready,
    not_ready_summary,
    pods,
    pool_on_fake_driver,
    sample_secret,
    start_operator,
    wait_for,
)

pytestmark = pytest.mark.realnova
NOVA, POOL = "nova", "rack7"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    workdir = pathlib.Path(tmp_path_factory.mktemp("real"))
    handle = launch_real(
        workdir,
        releases=("2025.2",),
        node_labels={"compute-0": POOL_LABELS, "compute-1": POOL_LABELS},
    )
    try:
        assert handle.real is not None
        handle.apply(REPO / "config" / "crd", REPO / "config" / "rbac")
        handle.create_gateway(NAMESPACE, "public-gateway")
        handle.real.openstack.add_service_user("nova", sample_secret("nova-service-user", "password"))
        start_operator(handle)
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def minimal(cluster: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> SimHandle:
    """The minimal sample and the NovaCompute sample (on the fake driver) applied, both Ready."""
    workdir = pathlib.Path(tmp_path_factory.mktemp("samples"))
    cluster.apply(
        SAMPLES / "secrets.yaml",
        REPO / "tools" / "simcluster" / "samples" / "dependencies.yaml",
        SAMPLES / "nova_minimal.yaml",
        pool_on_fake_driver(workdir),
        namespace=NAMESPACE,
    )
    wait_for(
        lambda: is_ready(cluster, "novas", NOVA) or None,
        within=300,
        what=f"the minimal Nova Ready ({_summary(cluster, 'novas', NOVA)})",
        handle=cluster,
    )
    wait_for(
        lambda: is_ready(cluster, "novacomputes", POOL) or None,
        within=240,
        what=f"the sample pool Ready ({_summary(cluster, 'novacomputes', POOL)})",
        handle=cluster,
    )
    return cluster


def _summary(handle: SimHandle, plural: str, name: str) -> str:
    try:
        return not_ready_summary(handle, plural, name)
    except Exception as exc:
        return repr(exc)


def test_db_sync_ran_the_real_nova_manage_and_mapped_both_cells(minimal: SimHandle) -> None:
    assert minimal.real is not None
    rows = minimal.real.backends.mariadb.sql(
        "SELECT name FROM cell_mappings ORDER BY id", database="nova_api"
    )
    assert [r[0] for r in rows] == ["cell0", "cell1"]
    (job,) = [p for p in pods(minimal) if p["metadata"]["name"].startswith(f"{NOVA}-db-sync-")]
    assert job["status"]["phase"] == "Succeeded"
    terminated = job["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 0
    assert "cell0=" in terminated.get("message", "")
    assert "cell1=" in terminated.get("message", "")


def test_every_deployment_is_available_by_its_real_probes(minimal: SimHandle) -> None:
    kube = minimal.cluster.kube
    for role in ("", "-metadata", "-scheduler", "-conductor", "-novncproxy"):
        dep = kube.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{NOVA}{role}")
        want = dep["spec"]["replicas"]
        assert dep["status"].get("availableReplicas") == want, (role, dep["status"])
    for pod in pods(minimal):
        if pod["metadata"]["name"].startswith(f"{NOVA}-db-sync-"):
            continue
        assert all(cs["ready"] for cs in pod["status"]["containerStatuses"]), pod["metadata"]["name"]


def test_the_compute_service_list_has_one_row_per_replica_under_its_pod_name(minimal: SimHandle) -> None:
    client = OpenStackClient(minimal, compute_url(minimal, NOVA))
    services = client.services()

    def pod_names(role: str) -> set[str]:
        return {
            p["metadata"]["name"]
            for p in pods(
                minimal, selector=f"app.kubernetes.io/instance={NOVA},app.kubernetes.io/component={role}"
            )
            if not p["metadata"].get("deletionTimestamp")
        }

    for binary, role in (("nova-scheduler", "scheduler"), ("nova-conductor", "conductor")):
        rows = [s for s in services if s["binary"] == binary]
        assert {s["host"] for s in rows} == pod_names(role), (binary, rows)
        assert all(s["state"] == "up" and s["status"] == "enabled" for s in rows), rows
    computes = {s["host"]: s for s in services if s["binary"] == "nova-compute"}
    assert set(computes) == {"compute-0", "compute-1"}
    assert all(s["state"] == "up" for s in computes.values()), computes


def test_the_console_page_is_served_by_the_real_novncproxy(minimal: SimHandle) -> None:
    svc = minimal.cluster.kube.get(f"/api/v1/namespaces/{NAMESPACE}/services/{NOVA}-novncproxy")
    assert http_status(f"http://{svc['spec']['clusterIP']}:6080/vnc_lite.html") == 200
