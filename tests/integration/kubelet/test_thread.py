"""The kubelet stand-in driven from synchronous code (as the launcher would run it)."""

from __future__ import annotations

import os
import pathlib
import time
import uuid

import pytest
from simcluster import ControlPlane, Kube
from simcluster.kubelet import Image
from simcluster.kubelet.thread import KubeletThread

from .conftest import IMAGE

pytestmark = pytest.mark.integration


def test_a_thread_runs_the_stand_in_and_stopping_it_leaves_nothing(
    control_plane: ControlPlane, image: Image, tmp_path: pathlib.Path
) -> None:
    kube = Kube(control_plane.server, control_plane.admin_token, control_plane.ca_file)
    node = f"standin-thread-{uuid.uuid4().hex[:6]}"
    standin = KubeletThread(
        control_plane.server,
        control_plane.admin_token,
        control_plane.ca_file,
        [node],
        {IMAGE: image},
        tmp_path / "kubelet",
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
        assert kube.get(f"/api/v1/namespaces/default/pods/{node}")["status"]["podIP"].startswith("10.244.")
    finally:
        standin.stop(remove_nodes=True)
    time.sleep(0.2)
    assert "simkube0" not in os.popen("ip -o link show").read()
    assert "simkubelet" not in os.popen("nft list tables").read()
    assert not any(
        b"kubelet/shim.py" in _cmdline(p) for p in pathlib.Path("/proc").iterdir() if p.name.isdigit()
    )


def _cmdline(proc: pathlib.Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""
