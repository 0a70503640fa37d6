"""The samples through the real Nova: the operator as its own process on the real-Nova tier.

db-sync runs the real ``nova-manage`` against MariaDB, the five Deployments turn Available by their
real probes (``nova-amqp-ready`` against the real broker, httpGet on the API and the console page),
the NovaCompute sample pool runs nova-compute with the fake driver on two real nodes, and the
compute API, reached through Keystone's token, lists a service row per replica under its pod's name.
"""

from __future__ import annotations

import pytest
from simcluster import SimHandle

from nova_operator import catalog
from nova_operator.models.common import STOP_MARGIN_SECONDS
from tests.realnova.realcluster import (
    NAMESPACE,
    NOVA,
    POOL,
    OpenStackClient,
    compute_url,
    http_status,
    pods,
    service_address,
    wait_for,
)

pytestmark = pytest.mark.realnova


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
    for pod in pods(minimal, selector=f"app.kubernetes.io/instance={NOVA}"):
        if pod["metadata"].get("deletionTimestamp"):
            continue  # a pod of an earlier rollout on its way out
        if any(o.get("kind") == "Job" for o in pod["metadata"].get("ownerReferences") or []):
            continue  # db-sync, the pool's discover-hosts (kept 300 s after it ends), a db-archive run
        assert all(cs["ready"] for cs in pod["status"]["containerStatuses"]), pod["metadata"]["name"]


def test_the_pools_pods_get_the_installed_releases_own_stop_bound(minimal: SimHandle) -> None:
    """Issue 38 item 4: the kubelet gives nova-compute as long as the release's nova may take to stop
    ([DEFAULT] graceful_shutdown_timeout of the Nova's installed release, plus the margin), not 30 s."""
    kube = minimal.cluster.kube
    release = kube.get(f"/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/{NAMESPACE}/novas/{NOVA}")[
        "status"
    ]["installedRelease"]
    option = catalog.load_catalog(release).option("DEFAULT", "graceful_shutdown_timeout")
    assert option is not None
    assert option.default is not None
    want = option.default + STOP_MARGIN_SECONDS
    ds = kube.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{POOL}-nova-compute")
    assert ds["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == want
    running = [
        p
        for p in pods(
            minimal, selector=f"app.kubernetes.io/instance={POOL},app.kubernetes.io/component=nova-compute"
        )
        if not p["metadata"].get("deletionTimestamp")
    ]
    assert running
    assert {p["spec"]["terminationGracePeriodSeconds"] for p in running} == {want}


def test_the_compute_service_list_has_one_row_per_replica_under_its_pod_name(minimal: SimHandle) -> None:
    """Every live scheduler and conductor pod has its own row, up and enabled, and no other row is up;
    both pool hosts are up. Modules before this one may have rolled the pods (a rotation): the rows of
    the pods they replaced stay until nova reports them down and the operator deletes them
    (test_service_rows_real), so the list is awaited, not read once."""
    client = OpenStackClient(minimal, compute_url(minimal, NOVA))

    def pod_names(role: str) -> set[str]:
        return {
            p["metadata"]["name"]
            for p in pods(
                minimal, selector=f"app.kubernetes.io/instance={NOVA},app.kubernetes.io/component={role}"
            )
            if not p["metadata"].get("deletionTimestamp")
        }

    def mismatch() -> list[str]:
        services = client.services()
        wrong = []
        for binary, role in (("nova-scheduler", "scheduler"), ("nova-conductor", "conductor")):
            up = {s["host"] for s in services if s["binary"] == binary and s["state"] == "up"}
            live = pod_names(role)
            if up != live:
                wrong.append(f"{binary}: up rows {sorted(up)}, live pods {sorted(live)}")
            wrong += [
                f"{binary} row {s['host']} is {s['status']}"
                for s in services
                if s["binary"] == binary and s["host"] in live and s["status"] != "enabled"
            ]
        computes = {s["host"]: s["state"] for s in services if s["binary"] == "nova-compute"}
        if computes != {"compute-0": "up", "compute-1": "up"}:
            wrong.append(f"nova-compute rows {computes}")
        return wrong

    last: list[list[str]] = []

    def settled() -> bool | None:
        last.append(mismatch())
        return not last[-1] or None

    wait_for(
        settled, within=240, what="one up row per live pod", handle=minimal, detail=lambda: str(last[-1])
    )


def test_the_console_page_is_served_by_the_real_novncproxy(minimal: SimHandle) -> None:
    address, port = service_address(minimal, f"{NOVA}-novncproxy", 6080)
    assert http_status(f"http://{address}:{port}/vnc_lite.html") == 200
