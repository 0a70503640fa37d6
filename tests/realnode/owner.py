"""A process that starts a real node on a running control plane, runs a pod there and then kills
itself with SIGKILL, without stopping anything: what a killed test session would leave. Used by
test_node.py (not a test module).

    python owner.py WORKDIR CP_WORKDIR CP_BINDIR API_PORT ADMIN_TOKEN NAMESPACE
"""

from __future__ import annotations

import os
import pathlib
import signal
import sys
import time
from dataclasses import dataclass

from realnode import BUSYBOX_IMAGE, RealNodes, busybox_image
from simcluster.client.kube import Kube
from simcluster.platform.controlplane import ControlPlane


@dataclass
class Attached:
    """A control plane started by another process (its ports, token and certificate)."""

    control_plane: ControlPlane
    kube: Kube


def main(argv: list[str]) -> None:
    workdir, cp_workdir, cp_bindir, port, token, namespace = argv
    plane = ControlPlane(
        pathlib.Path(cp_workdir), pathlib.Path(cp_bindir), admin_token=token, api_port=int(port)
    )
    kube = Kube(plane.server, token, plane.ca_file)
    nodes = RealNodes(
        Attached(plane, kube),
        pathlib.Path(workdir),
        name_prefix="orphan",
        image_specs=[busybox_image()],
        dns=False,  # the cluster has its DNS, on the first nodes (another namespace)
    ).start()
    node = nodes.nodes[0].name
    kube.post(
        f"/api/v1/namespaces/{namespace}/pods",
        {
            "metadata": {"name": "orphaned"},
            "spec": {
                "nodeName": node,
                "containers": [
                    {
                        "name": "c",
                        "image": BUSYBOX_IMAGE,
                        "imagePullPolicy": "Never",
                        "command": ["sleep", "3600"],
                    }
                ],
            },
        },
    )
    deadline = time.monotonic() + 120
    while kube.get(f"/api/v1/namespaces/{namespace}/pods/orphaned")["status"].get("phase") != "Running":
        if time.monotonic() > deadline:
            raise SystemExit("the pod never ran")
        time.sleep(0.5)
    print("running", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1:])
