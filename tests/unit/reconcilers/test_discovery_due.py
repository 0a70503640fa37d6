"""When a pass waiting on the discover-hosts Job comes back (issue 41, item 4).

The Job's state machine is the spec's (§15): a finished Job is left alone for 30 s after its terminal
condition, then deleted, and the next pass creates a new one. What changed is only when that next
pass comes: at the grace's end when it is sooner than the 10 s poll, 1 s after the delete.
"""

from __future__ import annotations

import pathlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from nova_operator.kube import errors
from nova_operator.kube.resources import JOBS
from nova_operator.kube.types import Object
from nova_operator.models.novacompute import NovaCompute
from nova_operator.reconcilers.compute import host_discovery
from nova_operator.reconcilers.compute.context import ComputePass, ComputeSettings

NOW = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
ROOT = pathlib.Path(__file__).resolve().parents[3]


class Kube:
    def __init__(self, job: Object | None) -> None:
        self.job = job
        self.deleted: list[str] = []

    async def get(self, ref: Any, name: str, namespace: str | None = None) -> Object:
        if ref == JOBS and self.job is not None:
            return self.job
        raise errors.NotFound(404, "not found")

    async def delete(self, ref: Any, name: str, namespace: str | None = None, **_: Any) -> None:
        self.deleted.append(name)
        self.job = None


class Events:
    async def emit(self, obj: Object, type_: str, reason: str, message: str) -> None:
        return None


def finished_job(ago: float, condition: str = "Complete") -> Object:
    at = (NOW - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "nova-discover-hosts",
            "namespace": "ns",
            "ownerReferences": [{"kind": "Nova", "name": "nova", "uid": "nova-uid", "controller": True}],
        },
        "status": {"conditions": [{"type": condition, "status": "True", "lastTransitionTime": at}]},
    }


def make_pass(kube: Kube) -> ComputePass:
    nova: Object = yaml.safe_load((ROOT / "config" / "samples" / "nova_minimal.yaml").read_text())
    nova["metadata"] = {"name": "nova", "namespace": "ns", "uid": "nova-uid"}
    cr: Object = {
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "NovaCompute",
        "metadata": {"name": "pool", "namespace": "ns", "uid": "u1", "generation": 1},
        "spec": {"novaRef": {"name": "nova"}, "nodeSelector": {"pool": "a"}},
    }
    return ComputePass(
        kube=kube,  # type: ignore[arg-type]
        events=Events(),
        settings=ComputeSettings(),
        cr=cr,
        pool=NovaCompute.model_validate(cr),
        status={},
        pools=lambda ns, nova: [],
        nova=nova,
        now=NOW,
    )


@pytest.mark.parametrize("ago", [25.0, 29.0])
async def test_within_the_grace_the_pass_comes_back_when_it_ends(ago: float) -> None:
    kube = Kube(finished_job(ago))
    p = make_pass(kube)
    note = await host_discovery.discover(p, ["n1"])
    assert note == "discovery Job nova-discover-hosts finished and will be replaced"
    assert kube.deleted == []
    assert p.discovery_due == pytest.approx(30.0 - ago)


async def test_early_in_the_grace_the_due_time_is_past_the_10s_poll_which_still_applies() -> None:
    p = make_pass(Kube(finished_job(5.0)))
    await host_discovery.discover(p, ["n1"])
    assert p.discovery_due == pytest.approx(25.0)  # the Services step takes min(10 s poll, this)


@pytest.mark.parametrize("condition", ["Complete", "Failed"])
async def test_after_the_grace_the_job_is_deleted_and_the_next_pass_comes_in_1s(condition: str) -> None:
    kube = Kube(finished_job(31.0, condition))
    p = make_pass(kube)
    note = await host_discovery.discover(p, ["n1"])
    assert kube.deleted == ["nova-discover-hosts"]
    assert note.endswith("a new one starts on the next pass")
    assert p.discovery_due == p.settings.intervals.next_pass == 1.0


async def test_a_running_job_sets_no_due_time() -> None:
    job = finished_job(0.0)
    job["status"] = {}
    p = make_pass(Kube(job))
    assert await host_discovery.discover(p, ["n1"]) == "discovery Job nova-discover-hosts is running"
    assert p.discovery_due is None
