"""The nova image of a release (``realnode.nova_image``: Debian base + the release's venv, built
from the image contract) runs on a real node as the contract's uid with a read-only root: nova
imports with Debian's Python from its byte code, ``nova-manage`` and ``uwsgi`` start,
``nova-amqp-ready`` tells a connection to the broker's port from none, the noVNC page and the
programs the Jobs use are there.

The image is built or taken from its cache (cold: minutes, once per machine; warm: a stat) and
imported into the node's containerd here, so the import is measured on its own.
"""

from __future__ import annotations

import pathlib
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from realnode import RealNodes, nova_image
from simcluster import SimCluster, find_binaries
from simcluster.client.kube import Kube, KubeError

from nova_operator import image_contract as contract

pytestmark = pytest.mark.realnova

NS = "nova-image"
RELEASE = "2025.2"  # the sample's release
POD_TIMEOUT = 240.0  # generous: nova's imports on a busy 2-core machine
AMQP_PORT = 5672

INSPECT = f"""
{{
  echo "uid=$(id -u)"
  echo "gid=$(id -g)"
  if touch /probe-file 2>/dev/null; then echo root=rw; else echo root=ro; fi
  echo "python=$(readlink -f "$(command -v python3)")"
  echo "nova=$(python3 -c 'import nova, nova.version; print(nova.version.version_string())')"
  echo "manage=$(nova-manage --version 2>&1)"
  verbose=$(python3 -v -c 'import nova.compute.manager' 2>&1)
  echo "stale=$(printf '%s\\n' "$verbose" | grep -c 'bytecode is stale')"
  echo "cached=$(printf '%s\\n' "$verbose" | grep -c 'pyc matches ')"
  echo "uwsgi=$(uwsgi --version)"
  echo "novnc=$(test -f {contract.NOVNC_WEB}/vnc_lite.html && echo present)"
  echo "awk=$(echo one two | awk '{{print $2}}')"
  echo "date=$(date -u -d '-1 days' +%s | wc -c)"
  echo "instances=$(mkdir -p -m 0755 /var/lib/nova/instances && echo made)"
  said=$(NOVA_AMQP_PORT={AMQP_PORT} {contract.NOVA_AMQP_READY})
  echo "no-broker=$said exit $?"
  python3 -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", {AMQP_PORT})); s.listen()
c = socket.create_connection(("127.0.0.1", {AMQP_PORT})); a = s.accept(); time.sleep(60)' &
  for i in $(seq 60); do
    ready=$(NOVA_AMQP_PORT={AMQP_PORT} nova-amqp-ready) && break
    sleep 1
  done
  echo "broker=$ready"
  kill $!
}} >/dev/termination-log 2>&1
"""


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RealNodes, nova_image.NovaImage]]:
    image = nova_image.build(RELEASE)
    cluster = SimCluster(pathlib.Path(tmp_path_factory.mktemp("cp")), find_binaries(), kwok=False).start()
    real = RealNodes(cluster, pathlib.Path(tmp_path_factory.mktemp("rn")))
    try:
        real.start()
        # measured in two steps: the blobs into the node's content store (what a store shared by the
        # nodes would do once), then the layers unpacked into its snapshotter (each node's own)
        ctr = real.nodes[0].ctr
        t0 = time.monotonic()
        subprocess.run(ctr(*nova_image.import_command(image, "--no-unpack")), check=True, capture_output=True)
        t1 = time.monotonic()
        subprocess.run(ctr(*nova_image.import_command(image)), check=True, capture_output=True)
        t2 = time.monotonic()
        print(
            f"\nimport of {image.ref} ({image.tar.stat().st_size >> 20} MiB): content store {t1 - t0:.1f} s, "
            f"then unpack {t2 - t1:.1f} s"
        )
        cluster.kube.post("/api/v1/namespaces", {"metadata": {"name": NS}})
        yield real, image
    finally:
        real.stop()
        cluster.stop()


def _terminated(kube: Kube, name: str) -> dict[str, Any]:
    deadline = time.monotonic() + POD_TIMEOUT
    pod: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            pod = kube.get(f"/api/v1/namespaces/{NS}/pods/{name}")
        except KubeError as exc:
            if exc.status != 404:
                raise
        statuses = pod.get("status", {}).get("containerStatuses", [])
        if statuses and "terminated" in statuses[0]["state"]:
            terminated: dict[str, Any] = statuses[0]["state"]["terminated"]
            return terminated
        time.sleep(1)
    events = kube.get(f"/api/v1/namespaces/{NS}/events")["items"]
    said = [f"{e.get('reason')}: {e.get('message')}" for e in events if e["involvedObject"]["name"] == name]
    pytest.fail(
        f"pod {name} did not finish in {POD_TIMEOUT:.0f} s\nstatus: {pod.get('status')}\nevents: {said}"
    )


def _release_version(release: str) -> str:
    for line in nova_image.RELEASES.read_text().splitlines():
        fields = line.split()
        if fields and fields[0] == release:
            return fields[1]
    raise AssertionError(f"{release} not in {nova_image.RELEASES}")


def test_the_release_image_runs_nova_as_the_contracts_user_on_a_read_only_root(
    node: tuple[RealNodes, nova_image.NovaImage],
) -> None:
    real, image = node
    kube = real.cluster.kube
    kube.post(
        f"/api/v1/namespaces/{NS}/pods",
        {
            "metadata": {"name": "nova"},
            "spec": {
                "restartPolicy": "Never",
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": contract.UID,
                    "runAsGroup": contract.GID,
                },
                "containers": [
                    {
                        "name": "nova",
                        "image": image.ref,
                        "imagePullPolicy": "Never",
                        "command": [contract.SHELL, "-c", INSPECT],
                        "securityContext": {
                            "readOnlyRootFilesystem": True,
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        # the contract's writable directory, as the operator's pods mount it
                        "volumeMounts": [{"name": "state", "mountPath": "/var/lib/nova"}],
                    }
                ],
                "volumes": [{"name": "state", "emptyDir": {}}],
            },
        },
    )
    terminated = _terminated(kube, "nova")
    assert terminated["exitCode"] == 0, terminated
    seen = dict(line.split("=", 1) for line in terminated["message"].splitlines() if "=" in line)
    version = _release_version(RELEASE)
    assert seen["uid"] == str(contract.UID), seen
    assert seen["gid"] == str(contract.GID), seen
    assert seen["root"] == "ro", seen
    assert seen["python"] == "/usr/bin/python3.11", seen  # the venv runs the image's Debian interpreter
    assert seen["nova"] == version, seen
    assert seen["manage"] == version, seen
    # nova's modules load from their byte code: none is compiled again at a process's start (the
    # read-only root keeps nothing a process would compile)
    assert seen["stale"] == "0", seen
    assert int(seen["cached"]) > 500, seen
    assert seen["uwsgi"].startswith("2.0."), seen
    assert seen["novnc"] == "present", seen
    assert seen["awk"] == "two", seen
    assert int(seen["date"]) >= 10, seen  # epoch seconds and a newline: GNU date read '-1 days'
    assert seen["instances"] == "made", seen
    assert seen["no-broker"] == f"nova-amqp-ready: no established connection to port {AMQP_PORT} exit 1", seen
    assert seen["broker"].startswith("nova-amqp-ready: pid "), seen
    assert seen["broker"].endswith(f"is connected to port {AMQP_PORT}"), seen
