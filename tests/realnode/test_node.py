"""One real node (kubelet v1.37 on containerd, ``realnode.RealNodes``) on the project's control plane.

What a pod asks for is done by the real kubelet, containerd and runc, not judged by a look-alike: the
image is built here and imported with ``ctr``; the pod runs as a non-root uid on a read-only root with
ConfigMap and Secret volumes in the modes it asks for; exec and httpGet probes decide readiness; a
memory limit is enforced by the kernel. The last test stops the node and finds nothing left of it.

What a container sees is read from its termination message; the API server reaches the kubelet
(``kubectl logs``) through an egress proxy into the nodes' namespace (``realnode.access``).

Not skipped when something is missing: ``tools/realnova/install.sh`` installs containerd, runc, the
CNI plugins and busybox-static; ``tools/realnode/build.sh`` builds the kubelet (``.ci/run`` runs both).
"""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from realnode import BUSYBOX_IMAGE, RealNodes, busybox_image, cpu_weight, images, store
from realnode.access import accessible_control_plane
from realnode.cleanup import Traces, belongs, cgroup_dirs, pids, zombie
from realnode.dns import DNS_IP, query
from realnode.dns import NAMESPACE as DNS_NAMESPACE
from realnode.store import StoredImage
from simcluster.client.kube import Kube, KubeError
from simcluster.platform.controlplane import REPO
from simcluster.platform.installtools import tool
from simcluster.realtier.container_pids import container_pids, send

pytestmark = pytest.mark.realnova

OWNER = pathlib.Path(__file__).with_name("owner.py")
NS = "realnode-test"
APP_UID = 42424
FS_GROUP = 4242
POD_TIMEOUT = 150.0  # generous: a busy 2-core machine
STORED_IMAGE = "realnode.local/from-the-store:1"


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNodes]:
    cluster, access = accessible_control_plane(pathlib.Path(tmp_path_factory.mktemp("site")))
    # busybox under a name of its own, only in the store the node starts from
    stored = StoredImage(images.build(busybox_image()), BUSYBOX_IMAGE.rpartition(":")[0], (STORED_IMAGE,))
    root = store.ensure([stored], pathlib.Path(tmp_path_factory.mktemp("stores")))
    real = RealNodes(
        cluster,
        pathlib.Path(tmp_path_factory.mktemp("rn")),
        image_specs=[busybox_image()],
        access=access,
        store=root,
    )
    try:
        real.start()
        cluster.kube.post("/api/v1/namespaces", {"metadata": {"name": NS}})
        # ServiceAccount admission refuses pods until the controller manager made the namespace's SA
        Kube.wait(
            lambda: bool(cluster.kube.get(f"/api/v1/namespaces/{NS}/serviceaccounts/default")), 60, "SA"
        )
        yield real
    finally:
        real.stop()
        cluster.stop()


def _pod(kube: Kube, name: str) -> dict[str, Any]:
    return kube.get(f"/api/v1/namespaces/{NS}/pods/{name}")


def _wait_pod(
    nodes: RealNodes, name: str, check: Callable[[dict[str, Any]], bool], what: str
) -> dict[str, Any]:
    kube = nodes.cluster.kube
    deadline = time.monotonic() + POD_TIMEOUT
    pod: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            pod = _pod(kube, name)
            if check(pod):
                return pod
        except KubeError as exc:
            if exc.status != 404:
                raise
        time.sleep(0.5)
    events = kube.get(f"/api/v1/namespaces/{NS}/events")["items"]
    said = [f"{e.get('reason')}: {e.get('message')}" for e in events if e["involvedObject"]["name"] == name]
    pytest.fail(
        f"pod {name} not {what} after {POD_TIMEOUT:.0f} s\nstatus: {pod.get('status')}\n"
        f"events: {said}\n{nodes.logs(4000)}"
    )


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _container(pod: dict[str, Any], name: str, key: str = "containerStatuses") -> dict[str, Any]:
    statuses: list[dict[str, Any]] = pod.get("status", {}).get(key, [])
    return next((s for s in statuses if s["name"] == name), {})


def _restricted() -> dict[str, Any]:
    return {
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }


def _container_spec(name: str, command: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": BUSYBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": command,
        "securityContext": _restricted(),
        **extra,
    }


def _run_once(kube: Kube, name: str, containers: list[dict[str, Any]]) -> None:
    """A pod of ``containers`` that runs once, as the app's uid."""
    kube.post(
        f"/api/v1/namespaces/{NS}/pods",
        {
            "metadata": {"name": name},
            "spec": {
                "restartPolicy": "Never",
                "securityContext": {"runAsNonRoot": True, "runAsUser": APP_UID},
                "containers": containers,
            },
        },
    )


def test_the_node_is_ready_with_the_real_kubelet_and_containerd(nodes: RealNodes) -> None:
    node = nodes.cluster.kube.get("/api/v1/nodes/realnode-1")
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.37.2"
    assert info["containerRuntimeVersion"].startswith("containerd://1.")
    assert {"type": "InternalIP", "address": "10.87.0.2"} in node["status"]["addresses"]
    # the kubelet set its kernel tunables and kube-proxy its rules inside the namespaces only
    assert nodes.changed_host_settings() == []
    host_tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=True)
    assert "kube-proxy" not in host_tables.stdout

    def proxy_table() -> bool:
        out = subprocess.run(nodes.in_netns(["nft", "list", "tables"]), capture_output=True, text=True)
        return "table ip kube-proxy" in out.stdout

    Kube.wait(proxy_table, 60, "kube-proxy's nftables table in the nodes' namespace", interval=0.5)
    # the node's own hostname (its hostNetwork pods share it), the host's left as it was
    (first,) = nodes.nodes
    assert first.init is not None
    uts = f"--uts=/proc/{first.init.pid}/ns/uts"
    hostname = subprocess.run(["nsenter", uts, "hostname"], capture_output=True, text=True, check=True)
    assert hostname.stdout.strip() == "realnode-1"
    assert socket.gethostname() != "realnode-1"
    # its pods, under its cgroup root, weigh against the host's sessions what the stand-in's pods did
    assert cpu_weight.shares(first.cgroup_root) == cpu_weight.NODE_CPU_SHARES


INSPECT = """
{
  echo "uid=$(id -u)"
  echo "gid=$(id -g)"
  echo "groups=$(id -G)"
  if touch /probe-file 2>/dev/null; then echo root=rw; else echo root=ro; fi
  echo "config=$(stat -L -c '%a %g' /config/index.html)"
  echo "secret=$(stat -L -c '%a %g' /secret/password)"
  if [ "$(cat /secret/password)" = s3cret ]; then echo secret-readable=yes; fi
  echo "work=$(touch /work/x && echo writable)"
} >/dev/termination-log 2>&1
"""


def test_a_pod_from_a_local_image_runs_restricted_with_its_volumes_and_probes(nodes: RealNodes) -> None:
    kube = nodes.cluster.kube
    kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"},
                "data": {"index.html": "hello from a ConfigMap\n"}}, namespace=NS)  # fmt: skip
    kube.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                "stringData": {"password": "s3cret"}}, namespace=NS)  # fmt: skip
    mounts = [
        {"name": "config", "mountPath": "/config", "readOnly": True},
        {"name": "secret", "mountPath": "/secret", "readOnly": True},
        {"name": "work", "mountPath": "/work"},
    ]
    probe = {"periodSeconds": 2, "timeoutSeconds": 5, "failureThreshold": 3}
    kube.post(
        f"/api/v1/namespaces/{NS}/pods",
        {
            "metadata": {"name": "app", "labels": {"app": "web"}},
            "spec": {
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": APP_UID,
                    "runAsGroup": APP_UID,
                    "fsGroup": FS_GROUP,
                },
                "initContainers": [_container_spec("inspect", ["sh", "-c", INSPECT], volumeMounts=mounts)],
                "containers": [
                    _container_spec(
                        "web",
                        ["httpd", "-f", "-p", "8080", "-h", "/config"],
                        volumeMounts=mounts,
                        readinessProbe={"httpGet": {"path": "/index.html", "port": 8080}, **probe},
                    ),
                    _container_spec(
                        "worker",
                        [
                            "sh",
                            "-c",
                            "echo worker started as $(id -u); sleep 2; touch /work/ready; exec sleep 3600",
                        ],
                        volumeMounts=mounts,
                        readinessProbe={"exec": {"command": ["cat", "/work/ready"]}, **probe},
                    ),
                ],
                "volumes": [
                    {"name": "config", "configMap": {"name": "web", "defaultMode": 0o444}},
                    {"name": "secret", "secret": {"secretName": "creds", "defaultMode": 0o440}},
                    {"name": "work", "emptyDir": {}},
                ],
            },
        },
    )
    # the same image with a probe that can never pass: probes are really run, not assumed
    kube.post(
        f"/api/v1/namespaces/{NS}/pods",
        {
            "metadata": {"name": "never-ready"},
            "spec": {
                "securityContext": {"runAsNonRoot": True, "runAsUser": APP_UID},
                "containers": [
                    _container_spec(
                        "web",
                        ["httpd", "-f", "-p", "8080", "-h", "/tmp"],
                        readinessProbe={"httpGet": {"path": "/missing", "port": 8080}, **probe},
                    )
                ],
            },
        },
    )
    pod = _wait_pod(nodes, "app", _ready, "Ready")
    assert pod["spec"]["nodeName"] == "realnode-1"
    assert pod["status"]["podIP"].startswith("10.88.0.")
    inspect = _container(pod, "inspect", "initContainerStatuses")["state"]["terminated"]
    assert inspect["exitCode"] == 0, inspect
    seen = dict(line.split("=", 1) for line in inspect["message"].splitlines())
    assert seen["uid"] == str(APP_UID)
    assert seen["gid"] == str(APP_UID)
    assert str(FS_GROUP) in seen["groups"].split()
    assert seen["root"] == "ro"
    assert seen["config"] == f"444 {FS_GROUP}"
    assert seen["secret"] == f"440 {FS_GROUP}"
    assert seen["secret-readable"] == "yes"
    assert seen["work"] == "writable"
    assert all(_container(pod, c)["ready"] for c in ("web", "worker"))

    _wait_pod(nodes, "never-ready", lambda p: "running" in _container(p, "web").get("state", {}), "Running")
    events = f"/api/v1/namespaces/{NS}/events?fieldSelector=involvedObject.name=never-ready"
    Kube.wait(
        lambda: any(e["reason"] == "Unhealthy" and "404" in e["message"] for e in kube.get(events)["items"]),
        POD_TIMEOUT,
        "the kubelet's readiness-probe failure event for never-ready",
        interval=0.5,
    )
    never = _pod(kube, "never-ready")
    assert not _ready(never)
    assert _container(never, "web")["ready"] is False


def test_a_pod_runs_from_an_image_only_the_nodes_store_held(nodes: RealNodes) -> None:
    """The node's containerd started from a copy of a store (``realnode.store``): its CRI knows the
    store's image by the name it was tagged with there, with nothing imported into the node."""
    (node,) = nodes.nodes
    listed = subprocess.run(node.ctr("images", "ls", "-q"), capture_output=True, text=True, check=True)
    assert STORED_IMAGE in listed.stdout.split()
    kube = nodes.cluster.kube
    spec = _container_spec("stored", ["sh", "-c", "echo from-the-store >/dev/termination-log"])
    _run_once(kube, "stored", [{**spec, "image": STORED_IMAGE}])
    pod = _wait_pod(nodes, "stored", lambda p: p.get("status", {}).get("phase") == "Succeeded", "done")
    terminated = _container(pod, "stored")["state"]["terminated"]
    assert terminated["message"] == "from-the-store\n"
    # the store itself is unchanged by the node: its images, nothing of the node's containers
    assert nodes.store is not None
    assert (nodes.store / "io.containerd.metadata.v1.bolt" / "meta.db").stat().st_ino != (
        node.state / "containerd" / "root" / "io.containerd.metadata.v1.bolt" / "meta.db"
    ).stat().st_ino


def test_the_api_server_reads_a_containers_log_from_the_kubelet(nodes: RealNodes) -> None:
    """kubectl logs: API server -> egress proxy into the namespace -> kubelet (client certificate) ->
    containerd's log file."""
    kube = nodes.cluster.kube
    request = urllib.request.Request(
        f"{kube.server}/api/v1/namespaces/{NS}/pods/app/log?container=worker",
        headers={"Authorization": f"Bearer {kube.token}"},
    )
    context = ssl.create_default_context(cafile=str(nodes.cluster.control_plane.ca_file))
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        assert response.read().decode() == f"worker started as {APP_UID}\n"


def test_kubectl_exec_runs_a_command_in_the_container(nodes: RealNodes) -> None:
    """kubectl exec: the same way as logs, then the kubelet's stream to containerd's streaming server."""
    kubectl = [str(tool("kubectl")), f"--kubeconfig={nodes.cluster.control_plane.kubeconfig}", "-n", NS]
    out = subprocess.run(
        [*kubectl, "exec", "app", "-c", "worker", "--", "sh", "-c", "id -u; touch /x || echo read-only"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == str(APP_UID)
    assert out.stdout.rstrip().endswith("read-only")


def test_a_service_reaches_the_pod_through_kube_proxy(nodes: RealNodes) -> None:
    """kube-proxy's nftables rules, in the nodes' namespace, send a ClusterIP to the pod's httpd."""
    kube = nodes.cluster.kube
    service = kube.post(
        f"/api/v1/namespaces/{NS}/services",
        {
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    )
    url = f"http://{service['spec']['clusterIP']}/index.html"

    def answered() -> bool:
        # busybox's own wget -T crashes (trap 15): timeout(1) bounds it instead
        get = nodes.in_netns(["timeout", "5", "busybox", "wget", "-q", "-O", "-", url])
        return subprocess.run(get, capture_output=True, text=True).stdout == "hello from a ConfigMap\n"

    Kube.wait(answered, POD_TIMEOUT, f"{url} answered from the nodes' namespace", interval=1)


WHOAMI = """
sa=/var/run/secrets/kubernetes.io/serviceaccount
{
  echo "namespace=$(cat $sa/namespace)"
  echo "token-bytes=$(wc -c <$sa/token)"
  echo "ca=$(head -1 $sa/ca.crt)"
  echo "service=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"
  if nc -w 5 "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT" </dev/null; then echo api=reached; fi
} >/dev/termination-log
"""


def test_a_pod_gets_its_service_account_token_and_reaches_the_kubernetes_service(nodes: RealNodes) -> None:
    """ServiceAccount admission adds the projected volume, the kubelet fills it (a token it requests,
    the root CA the controller manager publishes), and the ``kubernetes`` Service leads to the API
    server. Only a TCP connection: busybox's TLS shares no cipher with the API server (seen)."""
    nodes.cluster.kube.post(
        f"/api/v1/namespaces/{NS}/pods",
        {
            "metadata": {"name": "whoami"},
            "spec": {
                "restartPolicy": "Never",
                "securityContext": {"runAsNonRoot": True, "runAsUser": APP_UID},
                "containers": [_container_spec("whoami", ["sh", "-c", WHOAMI])],
            },
        },
    )
    pod = _wait_pod(
        nodes, "whoami", lambda p: p["status"].get("phase") in ("Succeeded", "Failed"), "finished"
    )
    terminated = _container(pod, "whoami")["state"]["terminated"]
    assert terminated["exitCode"] == 0, terminated
    seen = dict(line.split("=", 1) for line in terminated["message"].splitlines())
    assert seen["namespace"] == NS
    assert int(seen["token-bytes"]) > 100
    assert seen["ca"] == "-----BEGIN CERTIFICATE-----"
    assert seen["service"] == "10.96.0.1:443"
    assert seen["api"] == "reached"


def test_a_memory_limit_oom_kills_the_container(nodes: RealNodes) -> None:
    limits = {"memory": "32Mi", "cpu": "200m"}
    nodes.cluster.kube.post(
        f"/api/v1/namespaces/{NS}/pods",
        {
            "metadata": {"name": "hog"},
            "spec": {
                "restartPolicy": "Never",
                "securityContext": {"runAsNonRoot": True, "runAsUser": APP_UID},
                # exec'd (no shell): the container's own process is the one killed (trap 15)
                "containers": [
                    _container_spec(
                        "hog",
                        ["dd", "if=/dev/zero", "of=/dev/null", "bs=100M", "count=1"],
                        resources={"limits": limits, "requests": limits},
                    )
                ],
            },
        },
    )
    pod = _wait_pod(nodes, "hog", lambda p: p["status"].get("phase") in ("Succeeded", "Failed"), "finished")
    terminated = _container(pod, "hog")["state"]["terminated"]
    assert pod["status"]["phase"] == "Failed", terminated
    assert terminated["reason"] == "OOMKilled", terminated
    assert terminated["exitCode"] == 137, terminated


RESOLVE = """
{
  echo "nameserver=$(awk '/^nameserver/ {print $2}' /etc/resolv.conf)"
  echo "search=$(awk '/^search/ {print $2, $3, $4}' /etc/resolv.conf)"
  for name in kubernetes.default.svc.cluster.local named.$NS.svc.cluster.local; do
    echo "$name=$(nslookup "$name" | awk '/^Address/ {a = $NF} END {print a}')"
  done
  # wget resolves as applications do (the search path, ndots:5); nslookup tries no search path
  for name in named.$NS.svc named.$NS named; do
    echo "$name=$(timeout 3 wget -q -O - "http://$name/index.html")"
  done
  # no timeout(1): only the lookup can take time, and the resolver bounds it
  echo "unknown=$(wget -q -O - http://no-such-host.invalid/ 2>&1)"
  # an answer, not a timeout (";; connection timed out")
  echo "unknown-answer=$(nslookup no-such-host.invalid | grep -c NXDOMAIN)"
} >/dev/termination-log 2>&1
"""


def test_a_pod_reaches_a_service_by_name_through_cluster_dns(nodes: RealNodes) -> None:
    """The kubelet gives a ClusterFirst pod the ``kube-dns`` ClusterIP and the namespace's search path;
    CoreDNS (``realnode.dns``) answers from the API server's Services: the full name, ``name.ns.svc``
    and the short name resolve to the ClusterIP, which serves the page; a name outside the cluster
    fails at once (nothing to forward to in the nodes' namespace)."""
    kube = nodes.cluster.kube
    service = kube.post(
        f"/api/v1/namespaces/{NS}/services",
        {
            "metadata": {"name": "named"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    )
    ip = service["spec"]["clusterIP"]
    _run_once(
        kube,
        "resolver",
        [_container_spec("resolver", ["sh", "-c", RESOLVE], env=[{"name": "NS", "value": NS}])],
    )
    pod = _wait_pod(
        nodes, "resolver", lambda p: p["status"].get("phase") in ("Succeeded", "Failed"), "finished"
    )
    terminated = _container(pod, "resolver")["state"]["terminated"]
    assert terminated["exitCode"] == 0, (terminated, pod["status"])
    seen = dict(line.split("=", 1) for line in terminated["message"].splitlines())
    assert seen["nameserver"] == DNS_IP, seen
    assert seen["search"] == f"{NS}.svc.cluster.local svc.cluster.local cluster.local", seen
    assert seen["kubernetes.default.svc.cluster.local"] == "10.96.0.1", seen
    assert seen[f"named.{NS}.svc.cluster.local"] == ip, seen
    for name in (f"named.{NS}.svc", f"named.{NS}", "named"):
        assert seen[name] == "hello from a ConfigMap", (name, seen)
    assert seen["unknown"] == "wget: bad address 'no-such-host.invalid'", seen
    assert int(seen["unknown-answer"]) > 0, seen


def test_cluster_dns_runs_restricted_and_answers_from_the_nodes_namespace(nodes: RealNodes) -> None:
    """CoreDNS runs as a non-root uid on a read-only root; the nodes' namespace asks the ``kube-dns``
    ClusterIP directly: a Service's name gives its ClusterIP, an unknown name NXDOMAIN."""
    kube = nodes.cluster.kube
    pods = kube.get(f"/api/v1/namespaces/{DNS_NAMESPACE}/pods?labelSelector=k8s-app%3Dkube-dns")["items"]
    assert len(pods) == 1
    assert _ready(pods[0])
    security = pods[0]["spec"]["containers"][0]["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert pods[0]["spec"]["securityContext"]["runAsNonRoot"] is True
    assert nodes.dns_seconds > 0
    assert nodes.netns_holder is not None
    netns = f"/proc/{nodes.netns_holder.pid}/ns/net"
    web = kube.get(f"/api/v1/namespaces/{NS}/services/web")["spec"]["clusterIP"]
    assert query(netns, f"web.{NS}.svc.cluster.local") == (0, [web])
    assert query(netns, f"absent.{NS}.svc.cluster.local") == (3, [])
    assert query(netns, "example.invalid") == (3, [])


def test_a_killed_owner_leaves_nothing_behind_either(nodes: RealNodes, tmp_path: pathlib.Path) -> None:
    """A process that started a node and a pod dies by SIGKILL: the parent-death signal ends what it
    started, and its janitor what containerd started (shims, containers), then the cgroups."""
    cp = nodes.cluster.control_plane
    owner = subprocess.run(
        [
            sys.executable,
            str(OWNER),
            str(tmp_path),
            str(cp.workdir),
            str(cp.bindir),
            str(cp.api_port),
            cp.admin_token,
            NS,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tools"), str(REPO)])},
    )
    assert owner.returncode == -signal.SIGKILL, owner.stderr
    assert owner.stdout == "running\n"
    traces = Traces.load(tmp_path / "traces.json")
    assert traces.net_inode is not None
    assert len(traces.mnt_inodes) == 1

    def gone() -> bool:
        alive = [p for p in pids() if not zombie(p) and belongs(p, traces)]
        return not alive and not any(cgroup_dirs(root) for root in traces.cgroup_roots)

    Kube.wait(gone, 60, "the janitor's sweep after the owner's death", interval=0.5)
    nodes.cluster.kube.delete("/api/v1/nodes/orphan-1")


def test_a_relay_reaches_a_server_of_the_host_at_its_own_address_from_the_nodes(nodes: RealNodes) -> None:
    """``relay``: a server listening on an address of the host's is reached at that same address and
    port from the nodes' namespace (where, without it, nothing listens there)."""
    address = "127.0.0.2"  # the host's (all of 127/8 is), and not yet bound in the nodes' namespace
    with socket.create_server((address, 0)) as server:
        port = server.getsockname()[1]
        script = (
            f"import socket; s = socket.create_connection(({address!r}, {port}), 5); "
            "print(s.recv(64).decode())"
        )
        probe = [sys.executable, "-c", script]
        refused = subprocess.run(nodes.in_netns(probe), capture_output=True, text=True)
        assert "ConnectionRefusedError" in refused.stderr

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.sendall(b"from the host")

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        nodes.relay(address, [port])
        done = subprocess.run(nodes.in_netns(probe), capture_output=True, text=True, timeout=30)
        thread.join(10)
    assert done.stdout.strip() == "from the host", done.stderr


def test_a_stopping_pod_whose_processes_are_killed_is_gone_before_its_grace_ends(nodes: RealNodes) -> None:
    """A pod stopping with a long grace (600 s, a preStop hook done, its process ignoring SIGTERM, as
    nova's bus roles sleep through it) ends once its container's processes are killed
    (``container_pids``): how the real tier cuts such a wait short. A second delete with a shorter
    grace does not: the kubelet does not cut short a stop in progress (kubernetes#113606)."""
    kube = nodes.cluster.kube
    name = "slow-stop"
    ignores = _container_spec(
        "main",
        ["sh", "-c", "trap '' TERM; while :; do sleep 1; done"],
        lifecycle={"preStop": {"exec": {"command": ["sleep", "2"]}}},
    )
    kube.post(
        f"/api/v1/namespaces/{NS}/pods",
        {
            "metadata": {"name": name},
            "spec": {
                "terminationGracePeriodSeconds": 600,
                "securityContext": {"runAsNonRoot": True, "runAsUser": APP_UID},
                "containers": [ignores],
            },
        },
    )
    _wait_pod(nodes, name, _ready, "Ready")
    path = f"/api/v1/namespaces/{NS}/pods/{name}"
    kube.request("DELETE", path)
    time.sleep(6)  # the hook has run, SIGTERM was sent and ignored: the kubelet waits out the 600 s
    stopping = _pod(kube, name)
    assert stopping["metadata"]["deletionGracePeriodSeconds"] == 600
    pids = container_pids(nodes, stopping, "main")  # the shell and its sleep of the moment
    assert pids
    send(pids, signal.SIGKILL)  # a sleep that ended meanwhile is skipped

    def gone() -> bool:
        try:
            _pod(kube, name)
        except KubeError as exc:
            return exc.status == 404
        return False

    Kube.wait(gone, 300, f"pod {name} gone once its processes were killed", interval=0.5)


def test_a_host_process_run_in_the_cluster_resolves_and_reaches_as_a_pod_does(nodes: RealNodes) -> None:
    """``in_cluster`` (the operator run locally): a process of the host in the nodes' network with the
    cluster's DNS resolves a Service by its short name in its namespace (the search path) and reaches
    it, and reaches the API server at the control plane's own address (its kubeconfig's); the host's
    own ``/etc/resolv.conf`` stays as it was."""
    kube = nodes.cluster.kube
    before = pathlib.Path("/etc/resolv.conf").read_text()
    api = urllib.parse.urlsplit(nodes.cluster.control_plane.server)
    script = (
        "import socket; ip = socket.gethostbyname('kubernetes'); "
        "socket.create_connection((ip, 443), 5).close(); "
        f"socket.create_connection(({api.hostname!r}, {api.port}), 5).close(); "
        "print(ip, open('/etc/resolv.conf').read().split()[1])"
    )
    done = subprocess.run(
        nodes.in_cluster([sys.executable, "-c", script]), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    ip, nameserver = done.stdout.split()
    assert ip == kube.get("/api/v1/namespaces/default/services/kubernetes")["spec"]["clusterIP"]
    assert nameserver == DNS_IP
    assert pathlib.Path("/etc/resolv.conf").read_text() == before
    # another namespace's search path: kube-dns is kube-system's
    short = [sys.executable, "-c", "import socket; print(socket.gethostbyname('kube-dns'))"]
    done = subprocess.run(nodes.in_cluster(short, DNS_NAMESPACE), capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == DNS_IP, done.stderr


def test_stopping_the_node_leaves_nothing_behind(nodes: RealNodes) -> None:
    assert nodes.leftovers() != [], "the check sees nothing even while the node runs"
    nodes.stop()
    assert nodes.leftovers() == []
