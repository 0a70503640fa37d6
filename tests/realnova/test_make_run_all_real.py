"""``make run REAL_NODES=1`` (issue 37 item 1): a cluster of real nodes only, no kubelet stand-in.

It runs ``python -m prepare run --all-real`` as the Makefile does (``--python`` for this interpreter
instead of ``make venv``). Asserts: four real nodes (``control-0``/``control-1`` untainted, the pool's
``compute-0``/``compute-1`` labelled and tainted) and no stand-in's node, bridge or state; every
supported release's nova image on every node; the samples Ready; the operator's pods (its chart's
defaults, no pin) Ready on the control nodes; ``openstack compute service list`` through the printed
``clouds.yaml`` from this (the user's) shell lists the scheduler, the conductor and nova-compute on
both compute nodes, up; the catalog's compute entry public on the host's loopback and internal by the
Service's name; Ctrl-C ends with status 0 and leaves no process, mount, cgroup, link or table.
It prints the pods' memory (the kubelets' summary) against their limits.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import time
from typing import Any

import pytest
from realnode.cleanup import Traces, belongs, cgroup_dirs, pids, zombie
from realnode.dns import REAL_NODE_LABEL
from simcluster.platform.installtools import tool
from simcluster.realtier.release_images import supported
from simcluster.realtier.services.openstack import VENVS

from tests.realnova.test_make_run import _wait_for_line, has_ready, kubectl_json, make_run

# long: a bring-up of four real nodes with three releases' images imported into each; make
# test-realnova runs it, make test does not.
pytestmark = [pytest.mark.realnova, pytest.mark.long, pytest.mark.timeout(3600)]

CONTROL = ("control-0", "control-1")
COMPUTE = ("compute-0", "compute-1")
DEDICATED = {"key": "example.org/dedicated", "value": "compute", "effect": "NoSchedule"}


def _openstack(env: dict[str, str], clouds: pathlib.Path, *args: str) -> Any:
    cli_env = {**env, "OS_CLIENT_CONFIG_FILE": str(clouds), "OS_CLOUD": "simcluster"}
    done = subprocess.run(
        [str(VENVS / "keystone" / "bin" / "openstack"), *args, "-f", "json"],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _memory(kubeconfig: str, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[str]:
    """Each pod's working set (the kubelet's summary) against its containers' memory limits."""
    limits = {}
    for pod in pods:
        total = [
            ((c.get("resources") or {}).get("limits") or {}).get("memory") for c in pod["spec"]["containers"]
        ]
        limits[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = "+".join(str(x) for x in total)
    lines = []
    for node in nodes:
        name = node["metadata"]["name"]
        summary = kubectl_json(
            kubeconfig, "get", "--raw", f"/api/v1/nodes/{name}/proxy/stats/summary", output=False
        )
        for pod in summary.get("pods", []):
            ref = pod["podRef"]
            rss = sum((c.get("memory") or {}).get("rssBytes", 0) for c in pod.get("containers", []))
            limit = limits.get((ref["namespace"], ref["name"]), "?")
            lines.append(
                f"  {name:10} {ref['namespace']}/{ref['name']}: RSS {rss / 2**20:.0f} MiB, limit {limit}"
            )
    return lines


def _diagnose(kubeconfig: pathlib.Path) -> None:
    """What the pods and the events say, for a run whose samples never got Ready."""
    for args in (("get", "pods", "-A", "-o", "wide"), ("get", "events", "-A", "--sort-by=.lastTimestamp")):
        done = subprocess.run(
            [str(tool("kubectl")), f"--kubeconfig={kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        print(f"$ kubectl {' '.join(args)}\n{done.stdout[-8000:]}{done.stderr[-2000:]}")


def _left_behind(workdir: pathlib.Path, traces: Traces, tag: str) -> list[str]:
    """Processes of the nodes' namespaces or cgroups or naming the run's directory, the nodes'
    cgroups, mounts of the directory, host links with the nodes' tag, a kube-proxy table on the host."""
    found = [f"process {p}" for p in pids() if not zombie(p) and belongs(p, traces)]
    found += [f"cgroup {d}" for root in traces.cgroup_roots for d in cgroup_dirs(root)]
    for pid in pids():
        try:
            cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(workdir) in cmdline and not zombie(pid):
            found.append(f"process {pid}: {cmdline[:200]}")
    found += [
        f"mount {m}" for m in pathlib.Path("/proc/self/mounts").read_text().splitlines() if str(workdir) in m
    ]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    found += [f"link {w}" for w in links.split() if tag in w]
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=True).stdout
    found += [f"nft {line}" for line in tables.splitlines() if "kube-proxy" in line]
    return found


def test_make_run_all_real_serves_the_samples_on_real_nodes_only_to_the_users_shell(
    tmp_path: pathlib.Path,
) -> None:
    t0 = time.monotonic()
    releases = supported()
    with make_run(tmp_path, "--all-real", stop_within=300) as run:
        log, proc, workdir, env = run.log, run.proc, run.workdir, run.env
        _wait_for_line(log, r"make run: prepared in \d+ s", proc, within=1800)
        nodes_line = _wait_for_line(log, r"real nodes (\S+, \S+, \S+, \S+) Ready \((.*)\)", proc, 1800)
        print(f"\nmake run REAL_NODES=1: {nodes_line.group(0)}")
        try:
            ready = _wait_for_line(
                log, r"the sample Nova and NovaCompute are Ready after ([\d.]+) s", proc, 1800
            )
        except AssertionError:
            _diagnose(workdir / "kubeconfig")
            raise
        print(f"  samples Ready {ready.group(1)} s after the cluster's start")
        kubeconfig = _wait_for_line(log, r"export KUBECONFIG=(\S+)", proc, 10).group(1)
        clouds = pathlib.Path(_wait_for_line(log, r"clouds\.yaml: (\S+)", proc, within=120).group(1))
        compute = _wait_for_line(log, r"compute API: (\S+)", proc, within=10).group(1)

        # every node real, the pool's tainted; no stand-in's node, bridge or state
        nodes = kubectl_json(kubeconfig, "get", "nodes")["items"]
        by_name = {n["metadata"]["name"]: n for n in nodes}
        assert sorted(by_name) == sorted((*CONTROL, *COMPUTE))
        for name, node in by_name.items():
            assert has_ready(node), name
            assert node["metadata"]["labels"].get(REAL_NODE_LABEL) == "true", name
            assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://"), name
            taints = [{k: t[k] for k in ("key", "value", "effect")} for t in node["spec"].get("taints", [])]
            assert taints == ([DEDICATED] if name in COMPUTE else []), (name, taints)
            # every supported release's image on every node: an upgrade of the sample finds it
            images = {n for image in node["status"].get("images", []) for n in image.get("names", [])}
            for release in releases:
                assert f"ghcr.io/c5c3/nova:{release}" in images, (name, release)
        assert not (workdir / "real" / "kubelet").exists()
        assert not (workdir / "real" / "network.json").exists()  # no pod bridge claimed on the host

        # the operator by its chart's defaults: on the control nodes
        pods = kubectl_json(
            kubeconfig, "-n", "nova-system", "get", "pods", "-l", "app.kubernetes.io/name=nova-operator"
        )
        assert len(pods["items"]) == 2, pods["items"]
        for pod in pods["items"]:
            assert pod["spec"]["nodeName"] in CONTROL, pod["spec"]["nodeName"]
            assert has_ready(pod), pod["status"]
            assert not pod["spec"].get("nodeSelector"), pod["spec"]["nodeSelector"]
            assert not any("--nova-api-url" in a for a in pod["spec"]["containers"][0]["args"])
        for kind, name in (("nova", "nova"), ("novacompute", "rack7")):
            assert has_ready(kubectl_json(kubeconfig, "-n", "openstack", "get", kind, name)), kind

        # the printed clouds.yaml from this shell: the compute API at the host's loopback
        assert compute.startswith("http://127.0.0.1:"), compute
        rows = _openstack(env, clouds, "compute", "service", "list")
        binaries = sorted(r["Binary"] for r in rows)
        assert binaries.count("nova-scheduler") == 1, rows
        assert binaries.count("nova-conductor") == 1, rows
        computes = {r["Host"]: r for r in rows if r["Binary"] == "nova-compute"}
        assert set(computes) == set(COMPUTE), rows
        assert all(r["State"] == "up" for r in rows if r["Binary"] != "nova-osapi_compute"), rows
        endpoints = _openstack(env, clouds, "endpoint", "list", "--service", "compute")
        by_interface = {e["Interface"]: e["URL"] for e in endpoints}
        assert by_interface["public"] == compute, endpoints
        assert by_interface["internal"] == "http://nova.openstack.svc:8774/v2.1", endpoints

        wide = subprocess.run(
            [str(tool("kubectl")), f"--kubeconfig={kubeconfig}", "get", "pods", "-A", "-o", "wide"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        print(wide.stdout)
        every = kubectl_json(kubeconfig, "get", "pods", "-A")["items"]
        print("\n".join(_memory(kubeconfig, nodes, every)))
        traces = Traces.load(workdir / "real" / "realnodes" / "traces.json")
        assert traces.net_inode is not None
        assert len(traces.cgroup_roots) == 4
        stopped = time.monotonic()
    print(f"  Ctrl-C to exit: {time.monotonic() - stopped:.0f} s")
    assert run.rc == 0, log.read_text()[-4000:]
    time.sleep(1)
    tag = traces.cgroup_roots[0].split("-")[1]  # realnode-<tag>-<n>: the tag names its links too
    assert _left_behind(workdir, traces, tag) == []
    print(f"  wall time (prepare, bring-up, checks, Ctrl-C): {time.monotonic() - t0:.0f} s")
