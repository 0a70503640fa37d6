"""The mixed real tier (issue 37): the sample pool's compute node is a real node (a kubelet on
containerd running the nova image built from the image contract), the control nodes stay the kubelet
stand-in's, on one control plane.

The minimal Nova (on the stand-in) and the NovaCompute sample (on two real nodes) turn Ready; the pool's
pods run on the real kubelets and its nova-compute, reaching RabbitMQ, Keystone and Placement by their
Services' names through CoreDNS and kube-proxy, registers a service that is up; its memory is read
from the node's own cgroup. A server boots on one real node and resizes to the other (the day-one
scenario of ``test_day_one.py``). The teardown leaves nothing of the real nodes.

Long (``make test-realnova``): the real nodes and the image's unpack add minutes to the tier's bring-up.
"""

from __future__ import annotations

import base64
import configparser
import ipaddress
import json
import pathlib
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from realnode import dns
from realnode.dns import CLUSTER_DOMAIN, REAL_NODE_LABEL
from simcluster import SimHandle
from simcluster.platform.controlplane import REPO, free_port
from simcluster.platform.operator import operator_argv
from simcluster.realtier.launch import COMPUTE_IMAGE, launch_real
from simcluster.realtier.real_compute import RealCompute

from tests.realnova.realcluster import (
    NAMESPACE,
    NOVA,
    POOL,
    POOL_LABELS,
    RELEASE_UNDER_TEST,
    SAMPLES,
    OpenStackClient,
    compute_url,
    is_ready,
    not_ready_summary,
    pods,
    sample_secret,
    tier_nova,
    tier_pool,
    wait_for,
)
from tests.realnova.test_day_one import LARGE, SMALL, Day, new_day, resources

pytestmark = [pytest.mark.realnova, pytest.mark.long]

NODES = ("compute-0", "compute-1")  # the pool's hosts, both real
JSON = dict[str, Any]
POOL_SELECTOR = f"app.kubernetes.io/instance={POOL},app.kubernetes.io/component=nova-compute"


def _pod_summary(handle: SimHandle) -> str:
    out = []
    for pod in pods(handle, selector=POOL_SELECTOR):
        statuses = (pod.get("status") or {}).get("initContainerStatuses", []) + (
            (pod.get("status") or {}).get("containerStatuses", [])
        )
        states = {s["name"]: s.get("state") for s in statuses}
        out.append(f"{pod['metadata']['name']} on {pod['spec'].get('nodeName')}: {states}")
    return "; ".join(out)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    workdir = pathlib.Path(tmp_path_factory.mktemp("mixed"))
    control = {"node-role.kubernetes.io/control-plane": ""}
    handle = launch_real(
        workdir,
        releases=(RELEASE_UNDER_TEST,),
        compute_nodes=NODES,
        node_labels={
            "control-0": {**control, "topology.kubernetes.io/zone": "az1"},
            "control-1": {**control, "topology.kubernetes.io/zone": "az2"},
            **dict.fromkeys(NODES, POOL_LABELS),
        },
        real_compute_nodes=True,
    )
    assert handle.real is not None
    real = handle.real.real_compute
    assert real is not None
    try:
        handle.install()
        handle.create_gateway(NAMESPACE, "public-gateway")
        handle.real.openstack.add_service_user("nova", sample_secret("nova-service-user", "password"))
        # no registry here: the pool's tag-named image is the one imported into the node
        argv = operator_argv(handle, free_port(), "--default-image-pull-policy", "IfNotPresent")
        handle.spawn("operator", handle.real.in_cluster_dns(argv))
        handle.apply(
            SAMPLES / "secrets.yaml",
            REPO / "tools" / "simcluster" / "samples" / "dependencies.yaml",
            tier_nova(workdir),
            tier_pool(workdir),
            namespace=NAMESPACE,
        )
        t0 = time.monotonic()
        wait_for(
            lambda: is_ready(handle, "novas", NOVA) or None,
            within=400,
            what="the minimal Nova Ready",
            handle=handle,
            detail=lambda: not_ready_summary(handle, "novas", NOVA),
        )
        handle.real.startup["samples: Nova Ready"] = round(time.monotonic() - t0, 1)
        wait_for(
            lambda: is_ready(handle, "novacomputes", POOL) or None,
            within=400,
            what="the sample pool Ready on the real node",
            handle=handle,
            detail=lambda: (
                f"{not_ready_summary(handle, 'novacomputes', POOL)}; {_pod_summary(handle)}\n"
                + real.nodes.logs(3000)
            ),
        )
        handle.real.startup["samples: pool Ready"] = round(time.monotonic() - t0, 1)
        yield handle
    finally:
        handle.stop()
    assert real.nodes.leftovers() == []
    network = json.loads((workdir / "real" / "network.json").read_text())
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    assert f" {network['bridge']}:" not in links  # the stand-in's pod bridge gone too
    assert not [p for p in pathlib.Path("/proc").glob("[0-9]*") if _is_ovsdb_of(p, workdir)]


def _is_ovsdb_of(proc: pathlib.Path, workdir: pathlib.Path) -> bool:
    try:
        argv = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return argv[0].endswith(b"ovsdb-server") and any(str(workdir).encode() in a for a in argv)


def _real(handle: SimHandle) -> RealCompute:
    assert handle.real is not None
    assert handle.real.real_compute is not None
    return handle.real.real_compute


def test_the_pool_pods_run_on_the_real_nodes_with_the_contract_image(mixed: SimHandle) -> None:
    for name in NODES:
        node = mixed.cluster.kube.get(f"/api/v1/nodes/{name}")
        assert node["metadata"]["labels"][REAL_NODE_LABEL] == "true"
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    pool_pods = pods(mixed, selector=POOL_SELECTOR)
    assert sorted(pod["spec"]["nodeName"] for pod in pool_pods) == sorted(NODES)
    for pod in pool_pods:
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] is True
        assert status["image"] == f"{COMPUTE_IMAGE}:{RELEASE_UNDER_TEST}"
        assert status["containerID"].startswith("containerd://")
    # the control plane stayed on the stand-in's nodes
    for other in pods(mixed):
        if other["metadata"]["labels"].get("app.kubernetes.io/component") != "nova-compute":
            name = other["metadata"]["name"]
            assert other["spec"].get("nodeName") in ("control-0", "control-1", None), name


def _cluster_name(host: str) -> str:
    """``host`` as a pod's resolver completes it (search ``<ns>.svc.cluster.local svc.cluster.local``)."""
    dots = host.count(".")
    if host.endswith(".svc"):
        return f"{host}.{CLUSTER_DOMAIN}"
    if dots == 0:
        return f"{host}.{NAMESPACE}.svc.{CLUSTER_DOMAIN}"
    if dots == 1:
        return f"{host}.svc.{CLUSTER_DOMAIN}"
    return host


def test_the_pools_broker_and_keystone_are_service_names_reached_from_the_real_nodes(
    mixed: SimHandle,
) -> None:
    """The contract's RabbitMQ and Keystone hosts are Service names; from the nodes' namespace (where
    the pool's hostNetwork pod runs) they resolve by cluster DNS to the Services' ClusterIPs, and
    kube-proxy and the relay lead a connection to the real servers on the host."""
    real = _real(mixed)
    pod = pods(mixed, selector=POOL_SELECTOR)[0]
    (compute,) = pod["spec"]["containers"]
    env = {e["name"]: e for e in compute["env"]}
    secret_name = env["OS_DEFAULT__TRANSPORT_URL"]["valueFrom"]["secretKeyRef"]["name"]
    data = mixed.cluster.kube.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{secret_name}")["data"]
    conf = configparser.ConfigParser(interpolation=None)
    conf.read_string(base64.b64decode(data["nova-compute.conf"]).decode())
    targets = {
        "rabbitmq": urllib.parse.urlsplit(base64.b64decode(data["transport_url"]).decode().split(",")[0]),
        "keystone": urllib.parse.urlsplit(conf["keystone_authtoken"]["auth_url"]),
    }
    assert real.nodes.netns_holder is not None
    netns = f"/proc/{real.nodes.netns_holder.pid}/ns/net"
    for what, url in targets.items():
        host, port = url.hostname or "", url.port or {"rabbit": 5672, "http": 80}[url.scheme]
        with pytest.raises(ValueError, match="does not appear to be an IPv4 or IPv6 address"):
            ipaddress.ip_address(host)  # a name, not an address
        rcode, addresses = dns.query(netns, _cluster_name(host))
        assert rcode == 0, (what, host)
        assert len(addresses) == 1, (what, host, addresses)
        service = host.split(".")[0]
        namespace = host.split(".")[1] if "." in host else NAMESPACE
        svc = mixed.cluster.kube.get(f"/api/v1/namespaces/{namespace}/services/{service}")
        assert addresses == [svc["spec"]["clusterIP"]], what
        probe = f"import socket; socket.create_connection(({addresses[0]!r}, {port}), 10).close()"
        done = subprocess.run(
            real.nodes.in_netns([sys.executable, "-c", probe]), capture_output=True, text=True
        )
        assert done.returncode == 0, (what, done.stderr[-500:])


def test_nova_compute_on_each_real_node_registers_a_service_that_is_up(mixed: SimHandle) -> None:
    client = OpenStackClient(mixed, compute_url(mixed, NOVA))

    def up() -> dict[str, JSON] | None:
        rows = {s["host"]: s for s in client.services() if s["binary"] == "nova-compute"}
        return rows if set(rows) == set(NODES) and all(r["state"] == "up" for r in rows.values()) else None

    rows = wait_for(up, within=120, what=f"nova-compute up on {NODES}", handle=mixed)
    assert {r["status"] for r in rows.values()} == {"enabled"}
    hypervisors = client.call("GET", "/os-hypervisors/detail")["hypervisors"]
    assert {h["service"]["host"] for h in hypervisors} == set(NODES)


def test_the_pool_pods_memory_in_the_nodes_cgroup_stays_under_its_limit(mixed: SimHandle) -> None:
    real = _real(mixed)
    for pod in pods(mixed, selector=POOL_SELECTOR):
        (node,) = [n for n in real.nodes.nodes if n.name == pod["spec"]["nodeName"]]
        memory = pathlib.Path("/sys/fs/cgroup/memory") / node.cgroup_root / "kubepods"
        (cgroup,) = list(memory.glob(f"**/pod{pod['metadata']['uid']}"))
        stat = dict(line.split() for line in (cgroup / "memory.stat").read_text().splitlines())
        rss = int(stat["total_rss"])
        limit = int((cgroup / "memory.limit_in_bytes").read_text())
        print(f"pool pod on {node.name}: RSS {rss / 2**20:.0f} MiB, limit {limit / 2**20:.0f} MiB")
        assert 0 < rss < limit
        assert limit == 768 * 2**20  # the pool's default (request = limit), enforced by the real node
    print(f"startup seconds: {mixed.real.startup if mixed.real else {}}")


# -- the day-one server scenario (test_day_one.py's scenario 2) on the real compute nodes -------------


@pytest.fixture(scope="module")
def day(mixed: SimHandle) -> Iterator[Day]:
    """The day-one scenario's image and flavors (``new_day``); the server deleted afterwards."""
    d = new_day(mixed, "mixed")
    try:
        yield d
    finally:
        if d.server:
            d.delete()
        for fid in d.flavors.values():
            d.client.call("DELETE", f"/flavors/{fid}")


def test_a_server_boots_on_a_real_node_and_resizes_to_the_other_with_placement_following(day: Day) -> None:
    body = {
        "server": {
            "name": "mixed",
            "imageRef": day.image,
            "flavorRef": day.flavors[SMALL["name"]],
            "networks": "none",
        }
    }
    t0 = time.monotonic()
    day.server = str(day.client.call("POST", "/servers", body, microversion="2.37")["server"]["id"])
    shown = day.wait_status("ACTIVE", within=180)
    day.seconds["boot"] = round(time.monotonic() - t0, 1)
    source = shown["OS-EXT-SRV-ATTR:host"]
    assert source in NODES, shown
    assert day.allocated() == {source: resources(SMALL)}

    t0 = time.monotonic()
    day.client.call(
        "POST", f"/servers/{day.server}/action", {"resize": {"flavorRef": day.flavors[LARGE["name"]]}}
    )
    resized = day.wait_status("VERIFY_RESIZE", within=180)
    target = resized["OS-EXT-SRV-ATTR:host"]
    assert target in set(NODES) - {source}, resized
    day.client.call("POST", f"/servers/{day.server}/action", {"confirmResize": None})
    confirmed = day.wait_status("ACTIVE", within=120)
    day.seconds["resize and confirm"] = round(time.monotonic() - t0, 1)
    assert confirmed["OS-EXT-SRV-ATTR:host"] == target
    wait_for(
        lambda: len(day.allocations()) == 1 or None,
        within=60,
        what="the source host's allocation released by the confirm",
    )
    assert day.allocated() == {target: resources(LARGE)}
    print(f"mixed tier, day-one scenario 2: {source} -> {target}; seconds {day.seconds}")
