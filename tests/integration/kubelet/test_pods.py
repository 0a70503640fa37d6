"""The kubelet stand-in on the real control plane: nodes, containers as processes, volumes, env,
restarts, Job-style pods and the status it writes."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from simcluster.client.asynckube import AsyncKube
from simcluster.realtier.kubelet import STANDIN_LABEL, Kubelet

from .conftest import IMAGE, condition, container, create_pod, wait_pod

pytestmark = pytest.mark.integration
JSON = dict[str, Any]


def node_of(kubelet: Kubelet) -> str:
    return kubelet.nodes[0]


async def test_node_is_ready_with_capacity_and_a_renewed_lease(kube: AsyncKube, kubelet: Kubelet) -> None:
    name = node_of(kubelet)
    node = await kube.get(f"/api/v1/nodes/{name}")
    assert node is not None
    assert node["metadata"]["labels"][STANDIN_LABEL] == "standin"
    assert "kwok.x-k8s.io/node" not in node["metadata"].get("annotations", {})  # kwok's selector
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert node["status"]["allocatable"]["pods"] == "110"
    path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
    lease = await kube.get(path)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == name
    assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
    first = lease["spec"]["renewTime"]

    async def renewed() -> bool:
        again = await kube.get(path)
        return again is not None and again["spec"]["renewTime"] != first

    for _ in range(50):
        if await renewed():
            break
        await asyncio.sleep(0.1)
    assert await renewed()


REPORT = r"""
set -e
{
  echo "host=$(hostname)"
  echo "id=$(id -u):$(id -g):$(id -G)"
  echo "pid1=$(cat /proc/1/comm) self=$$$$ pgid=$(cut -d' ' -f5 /proc/$$/stat)" \
       "sid=$(cut -d' ' -f6 /proc/$$/stat)"
  grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status | tr -s '\t' ' '
  echo "env=$GREETING|$PASSWORD|$POD_NAME|$NODE|$CM_mode|$MEM"
  echo "args=$1|$2"
  echo "cm=$(cat /etc/cfg/settings.conf)"
  echo "cmmode=$(stat -L -c %a /etc/cfg/settings.conf)"
  echo "item=$(cat /secret/nested/pw)"
  echo "itemmode=$(stat -L -c %a /secret/nested/pw)"
  echo "sub=$(cat /etc/only.conf)"
  echo "labels=$(cat /podinfo/labels)"
  echo "projected=$(ls /projected | tr '\n' ' ')"
  touch /scratch/ok && echo "emptydir=writable"
  touch /tmp/x 2>/dev/null && echo "root=writable" || echo "root=readonly"
  touch /ro/x 2>/dev/null && echo "romount=writable" || echo "romount=readonly"
  echo "hostpath=$(cat /host/data/file)"
} > /dev/termination-log
"""


async def test_a_pod_runs_as_processes_with_its_volumes_env_and_user(
    kube: AsyncKube, kubelet: Kubelet, namespace: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}"
    await kube.create(
        f"{base}/configmaps", {"metadata": {"name": "cfg"}, "data": {"settings.conf": "a=1", "mode": "fast"}}
    )
    pw = base64.b64encode(b"s3cret").decode()
    await kube.create(f"{base}/secrets", {"metadata": {"name": "sec"}, "data": {"password": pw}})
    spec: JSON = {
        "restartPolicy": "Never",
        "securityContext": {"runAsUser": 42424, "runAsGroup": 42424, "fsGroup": 42424},
        "initContainers": [
            {
                "name": "prepare",
                "image": IMAGE,
                "command": ["sh", "-c", "echo hello > /host/data/file"],
                "securityContext": {"runAsUser": 0},
                "volumeMounts": [{"name": "host", "mountPath": "/host/data"}],
            }
        ],
        "containers": [
            {
                "name": "main",
                "image": IMAGE,
                "command": ["/bin/sh", "-c", REPORT, "report"],
                "args": ["$(GREETING)", "$$(GREETING)"],
                "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False},
                "resources": {"limits": {"memory": "64Mi"}},
                "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CM_"}],
                "env": [
                    {"name": "GREETING", "value": "hi-$(CM_mode)"},
                    {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "password"}}},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {
                        "name": "MEM",
                        "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
                    },
                ],
                "volumeMounts": [
                    {"name": "cfg", "mountPath": "/etc/cfg"},
                    {"name": "cfg", "mountPath": "/etc/only.conf", "subPath": "settings.conf"},
                    {"name": "sec", "mountPath": "/secret"},
                    {"name": "info", "mountPath": "/podinfo"},
                    {"name": "proj", "mountPath": "/projected"},
                    {"name": "scratch", "mountPath": "/scratch"},
                    {"name": "scratch", "mountPath": "/ro", "readOnly": True},
                    {"name": "host", "mountPath": "/host/data"},
                ],
            }
        ],
        "volumes": [
            {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 0o640}},
            {
                "name": "sec",
                "secret": {
                    "secretName": "sec",
                    "items": [{"key": "password", "path": "nested/pw", "mode": 0o400}],
                },
            },
            {
                "name": "info",
                "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]},
            },
            {
                "name": "proj",
                "projected": {"sources": [{"configMap": {"name": "cfg"}}, {"secret": {"name": "sec"}}]},
            },
            {"name": "scratch", "emptyDir": {}},
            {"name": "host", "hostPath": {"path": "/var/lib/sim-test", "type": "DirectoryOrCreate"}},
        ],
    }
    await create_pod(kube, namespace, node_of(kubelet), "reporter", spec, labels={"app": "report"})
    pod = await wait_pod(
        kube, namespace, "reporter", lambda p: p["status"].get("phase") in ("Succeeded", "Failed")
    )
    state = container(pod, "main")["state"]["terminated"]
    report = dict(line.split("=", 1) for line in state.get("message", "").splitlines() if "=" in line)
    assert pod["status"]["phase"] == "Succeeded", state
    assert report["host"] == "reporter"
    assert report["id"] == "42424:42424:42424"
    assert (
        report["pid1"] == "sh self=1 pgid=1 sid=1"
    )  # $$$$ is $$ after the expansion; a $(...) stays verbatim
    assert "CapEff: 0000000000000000" in state["message"]
    assert "CapBnd: 0000000000000000" in state["message"]
    assert "NoNewPrivs: 1" in state["message"]
    assert report["env"] == f"hi-fast|s3cret|reporter|{node_of(kubelet)}|fast|64"
    assert report["args"] == "hi-fast|$(GREETING)"
    assert report["cm"] == "a=1"
    assert report["cmmode"] == "640"
    assert (report["item"], report["itemmode"]) == ("s3cret", "440")  # fsGroup adds group read
    assert report["sub"] == "a=1"
    assert report["labels"] == 'app="report"'
    assert report["projected"].split() == ["mode", "password", "settings.conf"]
    assert report["emptydir"] == "writable"
    assert report["root"] == "readonly"
    assert report["romount"] == "readonly"
    assert report["hostpath"] == "hello"  # written by the init container, running as root
    host_file = kubelet.state_dir / "hostpath" / node_of(kubelet) / "var/lib/sim-test/file"
    assert host_file.read_text() == "hello\n"
    status = pod["status"]
    assert status["hostIP"] == kubelet.node_ip
    assert status["podIP"]
    assert status["startTime"]
    assert condition(pod, "PodScheduled") == "True"
    assert condition(pod, "Initialized") == "True"
    assert condition(pod, "Ready") == "False"


async def test_unknown_image_waits_in_err_image_pull(
    kube: AsyncKube, kubelet: Kubelet, namespace: str
) -> None:
    spec = {"containers": [{"name": "c", "image": "registry.invalid/nope:1", "command": ["true"]}]}
    await create_pod(kube, namespace, node_of(kubelet), "noimage", spec)
    pod = await wait_pod(
        kube,
        namespace,
        "noimage",
        lambda p: (
            "waiting" in container(p, "c")["state"]
            and container(p, "c")["state"]["waiting"]["reason"] == "ErrImagePull"
        ),
    )
    assert pod["status"]["phase"] == "Pending"


async def test_missing_secret_key_waits_then_runs_once_it_exists(
    kube: AsyncKube, kubelet: Kubelet, namespace: str
) -> None:
    spec = {
        "containers": [
            {
                "name": "c",
                "image": IMAGE,
                "command": ["sh", "-c", "echo $TOKEN > /dev/termination-log; sleep 3600"],
                "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "late", "key": "token"}}}],
            }
        ]
    }
    await create_pod(kube, namespace, node_of(kubelet), "waiter", spec)

    def config_error(p: JSON) -> bool:
        waiting = container(p, "c")["state"].get("waiting") or {}
        return waiting.get("reason") == "CreateContainerConfigError"

    pod = await wait_pod(kube, namespace, "waiter", config_error)
    assert container(pod, "c")["state"]["waiting"]["message"] == 'secret "late" not found'
    await kube.create(
        f"/api/v1/namespaces/{namespace}/secrets",
        {"metadata": {"name": "late"}, "data": {"token": base64.b64encode(b"t0k").decode()}},
    )
    pod = await wait_pod(kube, namespace, "waiter", lambda p: condition(p, "Ready") == "True")
    assert pod["status"]["phase"] == "Running"


async def test_a_crashing_container_loops_with_back_off(
    kube: AsyncKube, kubelet: Kubelet, namespace: str
) -> None:
    spec = {"containers": [{"name": "c", "image": IMAGE, "command": ["sh", "-c", "echo boom >&2; exit 3"]}]}
    await create_pod(kube, namespace, node_of(kubelet), "crasher", spec)

    def backing_off(p: JSON) -> bool:
        waiting = container(p, "c")["state"].get("waiting") or {}
        return waiting.get("reason") == "CrashLoopBackOff"

    pod = await wait_pod(kube, namespace, "crasher", backing_off)
    status = container(pod, "c")
    assert status["restartCount"] == 1  # restarted at once, then in back-off
    assert status["lastState"]["terminated"]["exitCode"] == 3
    assert status["lastState"]["terminated"]["reason"] == "Error"
    assert status["state"]["waiting"]["message"].startswith(
        "back-off 10s restarting failed container=c pod=crasher_"
    )
    assert pod["status"]["phase"] == "Running"
    assert condition(pod, "Ready") == "False"


@pytest.mark.parametrize(("code", "phase"), [(0, "Succeeded"), (2, "Failed")])
async def test_job_pods_end_by_exit_code_after_their_init_containers(
    kube: AsyncKube, kubelet: Kubelet, namespace: str, code: int, phase: str
) -> None:
    spec = {
        "restartPolicy": "Never",
        "initContainers": [
            {
                "name": "first",
                "image": IMAGE,
                "command": ["sh", "-c", "echo one > /work/log"],
                "volumeMounts": [{"name": "work", "mountPath": "/work"}],
            },
            {
                "name": "second",
                "image": IMAGE,
                "command": ["sh", "-c", "echo two >> /work/log"],
                "volumeMounts": [{"name": "work", "mountPath": "/work"}],
            },
        ],
        "containers": [
            {
                "name": "job",
                "image": IMAGE,
                "command": ["sh", "-c", f"cat /work/log > /dev/termination-log; exit {code}"],
                "volumeMounts": [{"name": "work", "mountPath": "/work"}],
            },
        ],
        "volumes": [{"name": "work", "emptyDir": {}}],
    }
    await create_pod(kube, namespace, node_of(kubelet), "job", spec)
    pod = await wait_pod(
        kube, namespace, "job", lambda p: p["status"].get("phase") in ("Succeeded", "Failed")
    )
    assert pod["status"]["phase"] == phase
    term = container(pod, "job")["state"]["terminated"]
    assert term["exitCode"] == code
    assert term["message"] == "one\ntwo\n"
    assert [c["state"]["terminated"]["exitCode"] for c in pod["status"]["initContainerStatuses"]] == [0, 0]


async def test_failed_init_container_fails_a_never_restarting_pod(
    kube: AsyncKube, kubelet: Kubelet, namespace: str
) -> None:
    spec = {
        "restartPolicy": "Never",
        "initContainers": [{"name": "init", "image": IMAGE, "command": ["sh", "-c", "exit 7"]}],
        "containers": [{"name": "main", "image": IMAGE, "command": ["true"]}],
    }
    await create_pod(kube, namespace, node_of(kubelet), "badinit", spec)
    pod = await wait_pod(kube, namespace, "badinit", lambda p: p["status"].get("phase") == "Failed")
    assert container(pod, "init", init=True)["state"]["terminated"]["exitCode"] == 7
    assert container(pod, "main")["state"]["waiting"]["reason"] == "PodInitializing"
    assert condition(pod, "Initialized") == "False"


async def test_configmap_updates_reach_the_running_container(
    kube: AsyncKube, kubelet: Kubelet, namespace: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}"
    await kube.create(f"{base}/configmaps", {"metadata": {"name": "live"}, "data": {"k": "v1"}})
    spec = {
        "containers": [
            {
                "name": "c",
                "image": IMAGE,
                "command": ["sleep", "3600"],
                "volumeMounts": [{"name": "live", "mountPath": "/cfg"}],
            }
        ],
        "volumes": [{"name": "live", "configMap": {"name": "live"}}],
    }
    created = await create_pod(kube, namespace, node_of(kubelet), "live", spec)
    await wait_pod(kube, namespace, "live", lambda p: condition(p, "Ready") == "True")
    proc = kubelet.workers[created["metadata"]["uid"]].procs["c"]
    code, out = await proc.exec(["cat", "/cfg/k"], 5)
    assert (code, out) == (0, "v1")
    await kube.merge_patch(f"{base}/configmaps/live", {"data": {"k": "v2"}})
    for _ in range(100):
        code, out = await proc.exec(["cat", "/cfg/k"], 5)
        if out == "v2":
            break
        await asyncio.sleep(0.1)
    assert (code, out) == (0, "v2")
    code, out = await proc.exec(["readlink", "/cfg/..data"], 5)
    assert out.startswith("..")
    assert json.dumps(out)  # a timestamped directory, swapped by rename
