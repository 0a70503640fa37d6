"""Issue 38 item 2 on a real node: ``spec.image.pullSecrets`` and ``spec.image.pullPolicy`` as the
real kubelet and containerd use them, against a registry that asks for credentials.

The registry (``realnode.registry``: Debian's distribution registry with htpasswd) holds the one
image a Nova's Jobs run, pushed there with its user's credentials. The operator's own renderer makes
the db-sync Job of two Novas naming that image with ``pullPolicy: Always``: one with
``pullSecrets`` naming a ``kubernetes.io/dockerconfigjson`` Secret for the registry, one without.
The Job without the secret first (nothing is on the node yet): its pod waits in ``ErrImagePull`` or
``ImagePullBackOff``, the kubelet's event says the registry refused it. Then the Job with the secret:
its pod runs, from the image the registry served. The image's ``nova-manage`` stands in for nova's:
it says what it was asked and sleeps, so the db-sync script's first step keeps the pod running.
"""

from __future__ import annotations

import pathlib
import re
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from realnode import RealNodes, busybox_image, images
from realnode.registry import Registry, docker_config_json
from simcluster import SimCluster, find_binaries
from simcluster.client.kube import Kube

from nova_operator.models.nova import Nova
from nova_operator.renderers import jobs
from tests.novas import nova_object

pytestmark = pytest.mark.realnova

NS = "pull-secrets"
REPOSITORY, TAG = "c5c3/nova", "private"
PULL_SECRET = "registry-credentials"
CONFIG_MAP = "nova-config"
POD_TIMEOUT = 150.0  # a busy 2-core machine
FAKE_NOVA_MANAGE = b'#!/bin/sh\necho "nova-manage $*"\nexec sleep 3600\n'
REFUSED = re.compile(r"401|unauthori[sz]ed|authoriz|no basic auth credentials", re.IGNORECASE)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RealNodes, Registry]]:
    cluster = SimCluster(pathlib.Path(tmp_path_factory.mktemp("cp")), find_binaries(), kwok=False).start()
    nodes = RealNodes(cluster, pathlib.Path(tmp_path_factory.mktemp("rn")), dns=False)  # no name looked up
    workdir = pathlib.Path(tmp_path_factory.mktemp("registry"))
    registry = Registry(nodes, workdir, "puller", secrets.token_hex(12))
    try:
        nodes.start()
        registry.start()
        cluster.kube.post("/api/v1/namespaces", {"metadata": {"name": NS}})
        # ServiceAccount admission refuses pods until the controller manager made the namespace's SA
        account = f"/api/v1/namespaces/{NS}/serviceaccounts/default"
        Kube.wait(lambda: bool(cluster.kube.get(account)), 60, "SA")
        yield nodes, registry
    finally:
        registry.stop()
        nodes.stop()
        cluster.stop()


def _nova_image() -> images.ImageSpec:
    """busybox with a ``nova-manage`` that answers and sleeps."""
    base = busybox_image("realnode.local/fake-nova:1")
    layer = {**base.layer, "bin/nova-manage": images.file(FAKE_NOVA_MANAGE, 0o755)}
    return images.ImageSpec(base.ref, layer, cmd=base.cmd, env=base.env)


def _db_sync_job(name: str, registry: Registry, *, pull_secret: bool) -> dict[str, Any]:
    image: dict[str, Any] = {
        "repository": f"{registry.host}/{REPOSITORY}",
        "tag": TAG,
        "pullPolicy": "Always",
    }
    if pull_secret:
        image["pullSecrets"] = [{"name": PULL_SECRET}]
    nova = Nova.model_validate(nova_object(NS, name, image=image))
    return jobs.db_sync_job(nova, CONFIG_MAP)


def _provide(kube: Kube, pod_spec: dict[str, Any]) -> None:
    """The Secrets and ConfigMaps the pod names (placeholder values: the fake nova-manage reads none)."""
    secret_keys: dict[str, set[str]] = {}
    for container in pod_spec["containers"]:
        for env in container.get("env") or []:
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                secret_keys.setdefault(ref["name"], set()).add(ref["key"])
    for name, keys in secret_keys.items():
        body = {"metadata": {"name": name}, "stringData": dict.fromkeys(keys, "placeholder")}
        kube.apply({"apiVersion": "v1", "kind": "Secret", **body}, namespace=NS)
    for volume in pod_spec.get("volumes") or []:
        if "configMap" in volume:
            body = {"metadata": {"name": volume["configMap"]["name"]}, "data": {"nova.conf": "[DEFAULT]\n"}}
            kube.apply({"apiVersion": "v1", "kind": "ConfigMap", **body}, namespace=NS)


def _job_pod(kube: Kube, job: str, check: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    deadline = time.monotonic() + POD_TIMEOUT
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        found = kube.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=job-name%3D{job}")["items"]
        if len(found) == 1 and check(found[0]):
            return dict(found[0])
        time.sleep(0.5)
    events = [
        f"{e['involvedObject']['name']} {e.get('reason')}: {e.get('message')}"
        for e in kube.get(f"/api/v1/namespaces/{NS}/events")["items"]
    ]
    pytest.fail(f"the pod of {job} not {what} after {POD_TIMEOUT:.0f} s: {found}\nevents: {events}")


def _state(pod: dict[str, Any]) -> dict[str, Any]:
    (status,) = pod.get("status", {}).get("containerStatuses") or [{}]
    return dict(status)


def test_a_jobs_pod_pulls_from_a_registry_asking_for_credentials_only_with_its_pull_secret(
    site: tuple[RealNodes, Registry],
) -> None:
    nodes, registry = site
    kube = nodes.cluster.kube
    ref = registry.push(images.build(_nova_image()), REPOSITORY, TAG)

    refused = _db_sync_job("no-secret", registry, pull_secret=False)
    allowed = _db_sync_job("with-secret", registry, pull_secret=True)
    for job in (refused, allowed):
        (container,) = job["spec"]["template"]["spec"]["containers"]
        assert container["image"] == ref
        assert container["imagePullPolicy"] == "Always"
    assert "imagePullSecrets" not in refused["spec"]["template"]["spec"]
    assert allowed["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": PULL_SECRET}]
    _provide(kube, allowed["spec"]["template"]["spec"])

    # without the Secret: the registry refuses the kubelet's pull
    kube.apply(refused, namespace=NS)
    name = refused["metadata"]["name"]
    pod = _job_pod(
        kube,
        name,
        lambda p: (
            (_state(p).get("state", {}).get("waiting") or {}).get("reason")
            in ("ErrImagePull", "ImagePullBackOff")
        ),
        "waiting on its image",
    )
    assert "running" not in _state(pod).get("state", {})
    about = f"involvedObject.name%3D{pod['metadata']['name']}"
    events = kube.get(f"/api/v1/namespaces/{NS}/events?fieldSelector={about}")
    failed = [e["message"] for e in events["items"] if e.get("reason") == "Failed"]
    assert any(REFUSED.search(m) for m in failed), failed

    # with it: the pod runs, from the image the registry served
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": PULL_SECRET},
            "stringData": {
                ".dockerconfigjson": docker_config_json(registry.host, registry.username, registry.password)
            },
        },
        namespace=NS,
    )
    kube.apply(allowed, namespace=NS)
    pod = _job_pod(
        kube,
        allowed["metadata"]["name"],
        lambda p: "running" in _state(p).get("state", {}),
        "running",
    )
    status = _state(pod)
    assert pod["status"]["phase"] == "Running"
    assert status["image"] == ref
    assert status["imageID"].startswith(f"{registry.host}/{REPOSITORY}@sha256:"), status
    # the one without stays refused: the image on the node now is no way round the registry
    still = _job_pod(kube, name, lambda p: True, "listed")
    assert "running" not in _state(still).get("state", {}), _state(still)
    print(f"item 2: refused without the pull secret: {failed[0]!r}; pulled with it: {status['imageID']}")
