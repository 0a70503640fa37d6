"""The kubelet stand-in's probes, deletion (preStop, SIGTERM, grace, SIGKILL, release) and cleanup."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from simcluster.client.asynckube import AsyncKube
from simcluster.realtier.kubelet import Kubelet

from .conftest import IMAGE, condition, container, create_pod, wait_pod

pytestmark = pytest.mark.integration
JSON = dict[str, Any]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_readiness_follows_an_exec_probe(kube: AsyncKube, kubelet: Kubelet, namespace: str) -> None:
    probe = {"exec": {"command": ["test", "-e", "/tmp/ready"]}, "periodSeconds": 1, "failureThreshold": 1}
    spec = {
        "containers": [{"name": "c", "image": IMAGE, "command": ["sleep", "3600"], "readinessProbe": probe}]
    }
    created = await create_pod(kube, namespace, kubelet.nodes[0], "ready", spec)
    pod = await wait_pod(kube, namespace, "ready", lambda p: p["status"].get("phase") == "Running")
    await asyncio.sleep(1.5)  # at least one failed probe
    pod = await wait_pod(kube, namespace, "ready", lambda p: True)
    assert condition(pod, "Ready") == "False"
    assert container(pod, "c")["started"] is True
    proc = kubelet.workers[created["metadata"]["uid"]].procs["c"]
    assert (await proc.exec(["touch", "/tmp/ready"], 5))[0] == 0
    pod = await wait_pod(kube, namespace, "ready", lambda p: condition(p, "Ready") == "True")
    assert container(pod, "c")["ready"] is True
    assert (await proc.exec(["rm", "/tmp/ready"], 5))[0] == 0
    await wait_pod(kube, namespace, "ready", lambda p: condition(p, "Ready") == "False")


async def test_an_http_readiness_probe_and_a_failing_liveness_probe_restart(
    kube: AsyncKube, kubelet: Kubelet, namespace: str
) -> None:
    port = free_port()
    server = (
        "import http.server as h, socketserver as s\n"
        "h.HTTPServer.server_bind = s.TCPServer.server_bind\n"
        f"h.HTTPServer(('127.0.0.1', {port}), h.SimpleHTTPRequestHandler).serve_forever()\n"
    )
    spec = {
        "containers": [
            {
                "name": "web",
                "image": IMAGE,
                "command": ["python3", "-c", server],
                "workingDir": "/tmp",
                "ports": [{"name": "http", "containerPort": port}],
                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
                "livenessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1},
            },
            {
                "name": "doomed",
                "image": IMAGE,
                "command": ["sleep", "3600"],
                "livenessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 2},
            },
        ]
    }
    await create_pod(
        kube,
        namespace,
        kubelet.nodes[0],
        "probed",
        spec,
    )

    def restarted(p: JSON) -> bool:
        return (
            bool(p.get("status", {}).get("containerStatuses")) and container(p, "doomed")["restartCount"] >= 1
        )

    pod = await wait_pod(kube, namespace, "probed", restarted, seconds=40)
    last = container(pod, "doomed")["lastState"]["terminated"]
    assert last["exitCode"] == 137  # sleep as PID 1 ignores SIGTERM: killed once the grace ran out
    web = container(pod, "web")
    assert web["ready"] is True
    assert web["restartCount"] == 0


async def test_a_startup_probe_that_never_succeeds_restarts_the_container(
    kube: AsyncKube, kubelet: Kubelet, namespace: str
) -> None:
    spec = {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "slow",
                "image": IMAGE,
                "command": ["sleep", "3600"],
                "startupProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 2},
                "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
            }
        ],
    }
    await create_pod(kube, namespace, kubelet.nodes[0], "slow", spec)
    pod = await wait_pod(
        kube,
        namespace,
        "slow",
        lambda p: bool(p["status"].get("containerStatuses")) and container(p, "slow")["restartCount"] >= 1,
        seconds=30,
    )
    assert container(pod, "slow")["started"] is False
    assert condition(pod, "Ready") == "False"  # readiness never ran before the startup probe passed


async def test_the_startup_probes_success_runs_the_readiness_probe_at_once(
    kube: AsyncKube, kubelet: Kubelet, namespace: str
) -> None:
    """As the kubelet's pod sync after a startup success triggers readiness: the pod is Ready at once,
    not one readiness period (here 60 s) later."""
    spec = {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "app",
                "image": IMAGE,
                "command": ["sleep", "3600"],
                "startupProbe": {
                    "exec": {"command": ["test", "-e", "/tmp/up"]},
                    "periodSeconds": 1,
                    "failureThreshold": 60,
                },
                "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 60},
            }
        ],
    }
    created = await create_pod(kube, namespace, kubelet.nodes[0], "triggered", spec)
    await wait_pod(kube, namespace, "triggered", lambda p: p["status"].get("phase") == "Running")
    await asyncio.sleep(2.5)  # startup probes that failed; readiness has not run
    pod = await wait_pod(kube, namespace, "triggered", lambda p: True)
    assert container(pod, "app")["started"] is False
    assert condition(pod, "Ready") == "False"
    proc = kubelet.workers[created["metadata"]["uid"]].procs["app"]
    assert (await proc.exec(["touch", "/tmp/up"], 5))[0] == 0
    pod = await wait_pod(kube, namespace, "triggered", lambda p: condition(p, "Ready") == "True", seconds=15)
    assert container(pod, "app")["started"] is True


async def test_probe_ticks_before_the_initial_delay_are_skipped(
    kube: AsyncKube, kubelet: Kubelet, namespace: str
) -> None:
    """A readiness probe with period 10 s and initial delay 4 s runs first at the 10 s tick."""
    spec = {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "app",
                "image": IMAGE,
                "command": ["sleep", "3600"],
                "readinessProbe": {
                    "exec": {"command": ["true"]},
                    "periodSeconds": 10,
                    "initialDelaySeconds": 4,
                },
            }
        ],
    }
    await create_pod(kube, namespace, kubelet.nodes[0], "delayed", spec)
    await wait_pod(kube, namespace, "delayed", lambda p: p["status"].get("phase") == "Running")
    await asyncio.sleep(6.5)  # past the delay, before the first tick after it
    pod = await wait_pod(kube, namespace, "delayed", lambda p: True)
    assert condition(pod, "Ready") == "False"
    await wait_pod(kube, namespace, "delayed", lambda p: condition(p, "Ready") == "True", seconds=15)


@contextlib.asynccontextmanager
async def recorded(kube: AsyncKube, namespace: str) -> AsyncIterator[list[JSON]]:
    """Every watch event of the namespace's pods while the block runs."""
    events: list[JSON] = []
    listing = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods")
    rv = listing["metadata"]["resourceVersion"]

    async def watch() -> None:
        async for event in kube.watch(f"/api/v1/namespaces/{namespace}/pods?resourceVersion={rv}"):
            events.append(event)

    task = asyncio.create_task(watch())
    try:
        yield events
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_deletion_runs_pre_stop_then_sigterm_then_sigkill_after_the_grace_period(
    kube: AsyncKube, kubelet: Kubelet, namespace: str
) -> None:
    log_dir = {"name": "log", "hostPath": {"path": f"/grace/{namespace}", "type": "DirectoryOrCreate"}}
    mount = [{"name": "log", "mountPath": "/log"}]
    polite = (
        "trap 'echo term-polite >> /log/events; exit 0' TERM; touch /log/polite; while :; do sleep 0.1; done"
    )
    stubborn = (
        "trap 'echo term-stubborn >> /log/events' TERM; touch /log/stubborn; while :; do sleep 0.1; done"
    )
    spec = {
        "terminationGracePeriodSeconds": 3,
        "volumes": [log_dir],
        "containers": [
            {
                "name": "polite",
                "image": IMAGE,
                "command": ["sh", "-c", polite],
                "volumeMounts": mount,
                "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "echo prestop >> /log/events"]}}},
            },
            {"name": "stubborn", "image": IMAGE, "command": ["sh", "-c", stubborn], "volumeMounts": mount},
        ],
    }
    created = await create_pod(kube, namespace, kubelet.nodes[0], "graceful", spec)
    uid = created["metadata"]["uid"]
    await wait_pod(kube, namespace, "graceful", lambda p: condition(p, "Ready") == "True")
    host_dir = kubelet.state_dir / "hostpath" / kubelet.nodes[0] / "grace" / namespace
    pids = [p.pid for p in kubelet.workers[uid].procs.values()]
    async with recorded(kube, namespace) as events:
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/graceful")
        for _ in range(200):
            if any(e["type"] == "DELETED" for e in events):
                break
            await asyncio.sleep(0.1)
    assert [e["type"] for e in events][-1] == "DELETED"
    lines = (host_dir / "events").read_text().splitlines()
    assert sorted(lines) == ["prestop", "term-polite", "term-stubborn"]
    assert lines.index("prestop") < lines.index("term-polite")  # preStop before its container's SIGTERM
    final = [e["object"] for e in events if e["type"] == "MODIFIED"][-1]
    states = {c["name"]: c["state"]["terminated"]["exitCode"] for c in final["status"]["containerStatuses"]}
    assert states == {"polite": 0, "stubborn": 137}
    assert final["status"]["phase"] == "Failed"  # the terminal phase of a deleted pod with a failure
    graces = [e["object"]["metadata"].get("deletionGracePeriodSeconds") for e in events]
    assert graces[0] == 3  # the user's delete: the pod's own grace period
    assert graces[-1] == 0  # the kubelet's release once the containers are gone
    assert not [pid for pid in pids if alive(pid)]


async def test_a_shorter_second_delete_or_a_force_delete_cuts_a_stop_in_progress_short(
    kube: AsyncKube, kubelet: Kubelet, namespace: str
) -> None:
    # A container that ignores SIGTERM, in a pod with a grace of two minutes: only the SIGKILL ends
    # it. A second delete with a grace of 2 s, or a force delete (0), must not wait the first one out.
    deaf = {
        "name": "deaf",
        "image": IMAGE,
        "command": ["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"],
        # the second delete comes during this hook, before the SIGTERM
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}},
    }
    spec = {"terminationGracePeriodSeconds": 120, "containers": [deaf]}
    names = ("shortened", "forced")
    uids = {}
    for name in names:
        uids[name] = (await create_pod(kube, namespace, kubelet.nodes[0], name, spec))["metadata"]["uid"]
    for name in names:
        await wait_pod(kube, namespace, name, lambda p: condition(p, "Ready") == "True")
    pids = {name: [p.pid for p in kubelet.workers[uids[name]].procs.values()] for name in names}
    for name in names:
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")
    await asyncio.sleep(3)  # in the preStop hook of the first delete
    assert all(alive(pid) for name in names for pid in pids[name])
    loop = asyncio.get_running_loop()
    begun = loop.time()
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/shortened", {"gracePeriodSeconds": 2})
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/forced", {"gracePeriodSeconds": 0})
    for _ in range(300):
        if not any(alive(pid) for name in names for pid in pids[name]):
            break
        await asyncio.sleep(0.2)
    assert not [pid for name in names for pid in pids[name] if alive(pid)]
    assert loop.time() - begun < 30  # the 2 s (0 s) grace, not what was left of the two minutes
    for _ in range(100):  # the kubelet releases the shortened pod once its container is gone
        listed = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods")
        if not {p["metadata"]["name"] for p in listed["items"]} & set(names):
            break
        await asyncio.sleep(0.2)
    assert not {p["metadata"]["name"] for p in listed["items"]} & set(names)


def shims_of(kubelet: Kubelet) -> list[str]:
    """The container shims this stand-in runs (other clusters on the machine have their own; their
    pod veths are test_network's business)."""
    return sorted(
        p.name
        for p in pathlib.Path("/proc").iterdir()
        if p.name.isdigit() and "kubelet/shim.py" in (line := _cmdline(p)) and str(kubelet.state_dir) in line
    )


def alive(pid: int) -> bool:
    return pathlib.Path(f"/proc/{pid}").exists()


def pid_namespaces() -> set[str]:
    out = set()
    for proc in pathlib.Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                out.add(os.readlink(proc / "ns" / "pid"))
    return out


def host_mounts() -> str:
    return pathlib.Path("/proc/self/mountinfo").read_text()


def _cmdline(proc: pathlib.Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


async def test_removing_the_node_leaves_no_process_mount_or_directory_behind(
    kube: AsyncKube, kubelet: Kubelet, namespace: str
) -> None:
    spec = {
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "containers": [
            {
                "name": "a",
                "image": IMAGE,
                "command": ["sh", "-c", "sleep 300 & sleep 300 & wait"],
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
            },
            {"name": "b", "image": IMAGE, "command": ["sh", "-c", "trap '' TERM; sleep 300"]},
        ],
    }
    created = await create_pod(kube, namespace, kubelet.nodes[0], "leaky", spec)
    await wait_pod(kube, namespace, "leaky", lambda p: condition(p, "Ready") == "True")
    worker = kubelet.workers[created["metadata"]["uid"]]
    namespaces = [os.readlink(f"/proc/{p.pid}/ns/pid") for p in worker.procs.values()]
    pod_dir = worker.dir
    assert len(shims_of(kubelet)) == 2  # one per container
    await kubelet.remove_node(kubelet.nodes[0])
    assert shims_of(kubelet) == []
    assert not pod_dir.exists()
    assert pid_namespaces() & set(namespaces) == set()
    assert str(kubelet.state_dir) not in host_mounts()
    assert await kube.get(f"/api/v1/nodes/{created['spec']['nodeName']}") is None


async def test_a_pod_deleted_while_it_waits_to_start_is_released(
    kube: AsyncKube, kubelet: Kubelet, namespace: str
) -> None:
    # Pods that cannot start: a Secret volume that does not exist (FailedMount), an image the stand-in
    # does not have (ErrImagePull), an env var from a missing Secret (CreateContainerConfigError).
    # Each waits for the next change; the delete is such a change, and it must end the wait rather
    # than wake it (a Deployment's replacement pod deleted with its Nova stayed Terminating for good).
    waiting = {
        "mount": {
            "volumes": [{"name": "s", "secret": {"secretName": "absent"}}],
            "containers": [
                {
                    "name": "c",
                    "image": IMAGE,
                    "command": ["sleep", "3600"],
                    "volumeMounts": [{"name": "s", "mountPath": "/s"}],
                }
            ],
        },
        "pull": {"containers": [{"name": "c", "image": "registry.invalid/nope:1", "command": ["true"]}]},
        "config": {
            "containers": [
                {
                    "name": "c",
                    "image": IMAGE,
                    "command": ["sleep", "3600"],
                    "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "t"}}}],
                }
            ]
        },
    }
    for name, spec in waiting.items():
        await create_pod(
            kube, namespace, kubelet.nodes[0], name, {"terminationGracePeriodSeconds": 1, **spec}
        )
    for name in waiting:
        await wait_pod(kube, namespace, name, lambda p: "podIP" in p["status"])
    await asyncio.sleep(1)  # in the wait for the next change
    for name in waiting:
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", {"gracePeriodSeconds": 1})
    left: set[str] = set(waiting)
    for _ in range(100):
        listed = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods")
        left = {p["metadata"]["name"] for p in listed["items"]} & set(waiting)
        if not left:
            break
        await asyncio.sleep(0.2)
    assert not left, f"still Terminating: {sorted(left)}"
    assert not kubelet.workers
