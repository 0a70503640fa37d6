"""A pod that cannot start, named in the waiting step's condition (issue 37 item 5), end to end.

The operator runs under its own token with the generated RBAC (pods: list, watch), so its Pod
informer, its transform and its wake are the production ones. The bare control plane has no
kubelet: the test creates the db-sync Job's pod and writes its status subresource itself.
"""

from __future__ import annotations

import json
from typing import Any

from nova_operator import naming
from nova_operator.kube import Kube
from nova_operator.kube.resources import JOBS, NOVAS, PODS
from nova_operator.kube.types import Object
from tests.integration.nova.inputs import SECRET_VALUES, cond, create_inputs, nova_body

from .conftest import Operator, Simulator, wait_for  # type: ignore[import-not-found]

POD = "nova-db-sync-x7k2p"


def waiting(reason: str, image: str, secret: str) -> Object:
    """A container status the kubelet writes when it gives up, its message quoting a Secret's value."""
    return {
        "name": "db-sync",
        "image": image,
        "imageID": "",
        "ready": False,
        "restartCount": 0,
        "state": {"waiting": {"reason": reason, "message": f"couldn't find key password={secret} in Secret"}},
    }


def running(image: str) -> Object:
    return {
        "name": "db-sync",
        "image": image,
        "imageID": "",
        "ready": True,
        "restartCount": 0,
        "started": True,
        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
    }


async def job_pod(admin: Kube, ns: str, job: Object) -> str:
    """The Job's pod as the Job controller makes it (its template's labels, the Job as controller)."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": POD,
            "labels": {
                **job["spec"]["template"]["metadata"]["labels"],
                "batch.kubernetes.io/job-name": "nova-db-sync",
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job["metadata"]["name"],
                    "uid": job["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "db-sync", "image": container["image"]}], "restartPolicy": "Never"},
    }
    await admin.create(PODS, body, ns)
    return str(container["image"])


def database_ready(ns: str, admin: Kube) -> Any:
    async def read() -> Object:
        return cond(await admin.get(NOVAS, "nova", ns), "DatabaseReady")

    return read


async def test_a_db_sync_pod_that_cannot_start_is_named_with_its_reason_and_never_its_message(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    simulator.hold_jobs = True  # the db-sync Job stays running: its pod is the test's
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(), ns)
    await wait_for(
        lambda: admin.list(JOBS, ns),
        lambda jobs: "nova-db-sync" in {j["metadata"]["name"] for j in jobs["items"]},
        within=60,
    )
    job = await admin.get(JOBS, "nova-db-sync", ns)
    assert job["spec"]["template"]["metadata"]["labels"][naming.MANAGED_BY_LABEL] == naming.MANAGED_BY
    await wait_for(database_ready(ns, admin), lambda c: c.get("reason") == "DBSyncInProgress", within=30)
    image = await job_pod(admin, ns, job)
    secret = SECRET_VALUES[0]

    # the kubelet cannot build the container's environment: CreateContainerConfigError
    status = {"phase": "Pending", "containerStatuses": [waiting("CreateContainerConfigError", image, secret)]}
    await admin.patch_status(PODS, POD, {"status": status}, ns)
    expected = f"db_sync job is running: pod {POD} cannot start: CreateContainerConfigError (image {image})"
    # woken by the pod's status (the step's own poll is 30 s away)
    found = await wait_for(database_ready(ns, admin), lambda c: c.get("message") == expected, within=20)
    assert (found["status"], found["reason"]) == ("False", "DBSyncInProgress")

    # the reason moves on (the image pull backs off): the message follows
    status = {"phase": "Pending", "containerStatuses": [waiting("ImagePullBackOff", image, secret)]}
    await admin.patch_status(PODS, POD, {"status": status}, ns)
    expected = f"db_sync job is running: pod {POD} cannot start: ImagePullBackOff (image {image})"
    await wait_for(database_ready(ns, admin), lambda c: c.get("message") == expected, within=20)

    # nothing of the kubelet's message is stored: not in the Nova, not in the operator's Pod cache
    nova = await admin.get(NOVAS, "nova", ns)
    assert secret not in json.dumps(nova)
    assert "couldn't find key" not in json.dumps(nova)
    pods = next(inf for inf in operator.manager.informers if inf.ref == PODS)
    cached = pods.cache.list(ns)
    assert [p["metadata"]["name"] for p in cached] == [POD]
    assert secret not in json.dumps(cached)
    assert "message" not in json.dumps(cached)

    # the pod starts: the message is the step's own again
    await admin.patch_status(
        PODS, POD, {"status": {"phase": "Running", "containerStatuses": [running(image)]}}, ns
    )
    await wait_for(
        database_ready(ns, admin), lambda c: c.get("message") == "db_sync job is running", within=20
    )

    # a steady wait writes nothing: forced passes over the same pod state send no write
    writes = operator.writes()
    for _ in range(5):
        await operator.force_pass("nova")
    assert operator.writes() - writes == 0
