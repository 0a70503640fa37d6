"""The kubelet stand-in driven from synchronous code (as the launcher would run it)."""

from __future__ import annotations

import os
import pathlib
import time
import uuid

import pytest
from simcluster import ControlPlane, Kube
from simcluster.realtier.kubelet import Image
from simcluster.realtier.kubelet.thread import KubeletThread
from simcluster.realtier.launch import claim_pod_network

from .conftest import IMAGE

pytestmark = pytest.mark.integration


def test_a_thread_runs_the_stand_in_and_stopping_it_leaves_nothing(
    control_plane: ControlPlane, image: Image, tmp_path: pathlib.Path
) -> None:
    kube = Kube(control_plane.server, control_plane.admin_token, control_plane.ca_file)
    node = f"standin-thread-{uuid.uuid4().hex[:6]}"
    network = claim_pod_network()  # a bridge of its own: another cluster on the machine may own simkube0
    standin = KubeletThread(
        control_plane.server,
        control_plane.admin_token,
        control_plane.ca_file,
        [node],
        {IMAGE: image},
        tmp_path / "kubelet",
        network=network,
    ).start()
    try:
        kube.post(
            "/api/v1/namespaces/default/pods",
            {
                "metadata": {"name": node},
                "spec": {
                    "nodeName": node,
                    "containers": [{"name": "c", "image": IMAGE, "command": ["sleep", "300"]}],
                },
            },
        )
        kube.wait(
            lambda: kube.get(f"/api/v1/namespaces/default/pods/{node}")["status"].get("phase") == "Running",
            30,
            "the pod Running",
        )
        assert kube.get(f"/api/v1/namespaces/default/pods/{node}")["status"]["podIP"].startswith(
            network["cidr"].rsplit(".", 2)[0] + "."
        )
    finally:
        standin.stop(remove_nodes=True)
    time.sleep(0.2)
    assert f" {network['bridge']}:" not in os.popen("ip -o link show").read()
    assert f"table ip {network['table']}\n" not in os.popen("nft list tables").read()
    assert not any(
        b"kubelet/shim.py" in (line := _cmdline(p)) and str(tmp_path).encode() in line
        for p in pathlib.Path("/proc").iterdir()
        if p.name.isdigit()
    )


def _cmdline(proc: pathlib.Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def test_an_image_added_later_starts_the_pod_that_waited_for_it(
    control_plane: ControlPlane, image: Image, tmp_path: pathlib.Path
) -> None:
    """``make run`` serves the other releases' images once built (issue 37 item 5): until then the pod
    waits in ErrImagePull, then it starts at its next try, with nothing else done."""
    kube = Kube(control_plane.server, control_plane.admin_token, control_plane.ca_file)
    node = f"standin-late-{uuid.uuid4().hex[:6]}"
    later = "sim.local/built-later:1"
    standin = KubeletThread(
        control_plane.server,
        control_plane.admin_token,
        control_plane.ca_file,
        [node],
        {IMAGE: image},
        tmp_path / "kubelet",
        network=claim_pod_network(),
    ).start()
    path = f"/api/v1/namespaces/default/pods/{node}"
    try:
        kube.post(
            "/api/v1/namespaces/default/pods",
            {
                "metadata": {"name": node},
                "spec": {
                    "nodeName": node,
                    "containers": [{"name": "c", "image": later, "command": ["sleep", "300"]}],
                },
            },
        )

        def waiting() -> str:
            statuses = kube.get(path)["status"].get("containerStatuses") or [{}]
            return str(((statuses[0].get("state") or {}).get("waiting") or {}).get("reason") or "")

        kube.wait(lambda: waiting() == "ErrImagePull", 30, "the pod waiting in ErrImagePull")
        standin.add_images({later: image})
        kube.wait(lambda: kube.get(path)["status"].get("phase") == "Running", 30, "the pod Running")
    finally:
        standin.stop(remove_nodes=True)
