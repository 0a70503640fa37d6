"""Two pools of one Nova (conflict, handover) and the pool config rolling (novacompute-crd.md §7, §8)."""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator.kube.resources import CONFIGMAPS, DAEMONSETS, NOVACOMPUTES, SECRETS
from nova_operator.kube.resources import NOVAS as NOVAS_REF

from .conftest import Env

pytestmark = pytest.mark.integration

HASH = "nova.openstack.c5c3.io/compute-config-hash"


async def entry_phase(env: Env, short: str, pool: str) -> str | None:
    entry = await env.entry(short, pool)
    return entry["phase"] if entry else None


async def test_a_node_held_by_an_older_pool_is_a_conflict_for_the_younger(env: Env) -> None:
    await env.nova()
    n1 = await env.node("n1", pool="a", zone="az1")
    await env.pool("older", selector="a")

    async def held() -> bool:
        return await entry_phase(env, "n1", "older") == "Pending"

    await env.until(held)
    await env.pool("younger", selector="a")

    async def conflict() -> bool:
        return await entry_phase(env, "n1", "younger") == "Conflict"

    await env.until(conflict)
    entry = await env.entry("n1", "younger")
    assert entry == {"name": n1, "phase": "Conflict", "zone": "az1", "conflictsWith": "older"}
    cond = await env.until(lambda: _cond(env, "NodesReady", "younger", "NodeConflict"))
    assert cond["status"] == "False"
    assert cond["message"] == f"nodes held by another pool of this Nova: {n1} (held by older)"
    ds = await env.until(lambda: env.get(DAEMONSETS, "younger-nova-compute"))
    (term,) = ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "NotIn", "values": [n1]}]
    await env.settle(1.0)
    events = await env.events("NodeConflict")
    assert len(events) == 1  # once per new conflict, not on every poll
    assert events[0]["count"] == 1
    assert events[0]["involvedObject"]["name"] == "younger"
    assert await entry_phase(env, "n1", "older") == "Pending"  # the holder keeps it


async def test_a_node_relabelled_to_another_pool_is_handed_over_without_a_disable(env: Env) -> None:
    await env.nova()
    n1 = await env.node("n1", pool="a", zone="az1")
    svc = env.fake.add_compute(n1)
    await env.pod("n1", pool="p1")
    await env.pool("p1", selector="a")
    await env.pool("p2", selector="b")

    async def active() -> bool:
        return await entry_phase(env, "n1", "p1") == "Active"

    await env.until(active)
    await env.relabel("n1", "b")

    async def releasing() -> bool:
        return await entry_phase(env, "n1", "p1") == "Releasing"

    await env.until(releasing)
    await env.pod_gone("n1", pool="p1")

    async def taken_over() -> bool:
        return await env.entry("n1", "p1") is None and await entry_phase(env, "n1", "p2") == "Active"

    await env.until(taken_over)
    entry = await env.entry("n1", "p2")
    assert entry is not None
    assert entry["serviceID"] == svc.uuid  # the same service, never disabled or deleted
    assert entry["serviceStatus"] == "enabled"
    assert env.fake.calls("PUT", "/v2.1/os-services") == []
    assert env.fake.calls("DELETE", "/v2.1/os-services") == []
    assert await env.events("ComputeServiceDisabled") == []


async def test_pool_config_rolls_on_spec_and_contract_changes_and_keeps_three_old_configmaps(
    env: Env,
) -> None:
    await env.nova()
    await env.node("n1", pool="a", zone="az1")
    await env.pool(extraConfig={"libvirt": {"virt_type": "qemu"}})
    health = await env.until(lambda: _cond(env, "ExtraConfigHealthy", "pool", "OwnedKeysOverridden"))
    assert health["status"] == "False"
    assert health["message"] == "extraConfig overrides owned keys of compute-pool.conf: [libvirt] virt_type"
    first = await env.until(lambda: _ds_field(env, lambda ds: _config_map(ds)))
    cm = await env.get(CONFIGMAPS, first)
    assert cm is not None
    assert "virt_type = qemu" in cm["data"]["compute-pool.conf"]

    names = {first}
    for i in range(4):
        await env.admin.patch(
            NOVACOMPUTES, "pool", {"spec": {"extraConfig": {"DEFAULT": {"debug": f"v{i}"}}}}, env.ns
        )
        names.add(
            await env.until(
                lambda: _ds_field(env, lambda ds: _config_map(ds) if _config_map(ds) not in names else None)
            )
        )
    await env.settle(1.0)
    listed = (
        await env.admin.list(CONFIGMAPS, env.ns, label_selector="cobaltcore.c5c3.io/config-base=pool-config")
    )["items"]
    assert len(names) == 5
    assert len(listed) == 4  # the current one and the three newest others
    assert first not in {c["metadata"]["name"] for c in listed}
    overrides = await env.events("ExtraConfigOwnedKeyOverride")
    assert len(overrides) == 1  # the set of keys never changed
    assert overrides[0]["count"] == 1

    ds = await env.get(DAEMONSETS, "pool-nova-compute")
    assert ds is not None
    before = ds["spec"]["template"]["metadata"]["annotations"][HASH]
    secret = await env.get(SECRETS, "nova-compute-config")
    assert secret is not None
    secret["data"]["password"] = "cm90YXRlZA=="  # a rotated password rolls the pods
    await env.admin.replace(SECRETS, secret, env.ns)
    after = await env.until(lambda: _ds_field(env, lambda d: _hash(d) if _hash(d) != before else None))
    assert after != before


async def _cond(env: Env, cond_type: str, pool: str, reason: str) -> dict[str, Any] | None:
    cond = await env.condition(cond_type, pool)
    return cond if cond is not None and cond["reason"] == reason else None


async def _ds_field(env: Env, pick: Any) -> Any:
    ds = await env.get(DAEMONSETS, "pool-nova-compute")
    return pick(ds) if ds is not None else None


def _config_map(ds: dict[str, Any]) -> str:
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    return str(volumes["pool-config"]["configMap"]["name"])


def _hash(ds: dict[str, Any]) -> str:
    return str(ds["spec"]["template"]["metadata"]["annotations"][HASH])


async def test_an_option_the_release_does_not_know_stops_before_the_daemonset(env: Env) -> None:
    await env.nova()
    await env.node("n1", pool="a", zone="az1")
    await env.pool(extraConfig={"libvirt": {"no_such_knob": "1"}})
    cond = await env.until(lambda: _cond(env, "ConfigReady", "pool", "ConfigError"))
    assert cond["status"] == "False"
    assert "no_such_knob" in cond["message"]
    await env.settle(1.0)
    assert await env.get(DAEMONSETS, "pool-nova-compute") is None
    events = await env.events("ConfigError")
    assert len(events) == 1
    assert events[0]["type"] == "Warning"
    assert events[0]["count"] == 1
    await env.admin.patch(
        NOVACOMPUTES, "pool", {"spec": {"extraConfig": {"libvirt": {"no_such_knob": None}}}}, env.ns
    )
    await env.until(lambda: env.get(DAEMONSETS, "pool-nova-compute"))


def _terms(ds: dict[str, Any]) -> list[dict[str, Any]]:
    return list(
        ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
    )


async def test_a_cleared_conflict_drops_the_exclusion_from_the_younger_pools_daemonset(env: Env) -> None:
    """A removal-only change of the DaemonSet: the NotIn term goes once the older pool lets go."""
    await env.nova()
    n1 = await env.node("n1", pool="a", zone="az1")
    await env.pool("older", selector="a")
    await env.until(lambda: _phase_is(env, "n1", "older", "Pending"))
    await env.pool("younger", selector="a")
    await env.until(lambda: _phase_is(env, "n1", "younger", "Conflict"))

    async def excluded() -> dict[str, Any] | None:
        ds = await env.get(DAEMONSETS, "younger-nova-compute")
        return ds if ds and any("matchFields" in t for t in _terms(ds)) else None

    ds = await env.until(excluded)
    assert _terms(ds)[0]["matchFields"] == [{"key": "metadata.name", "operator": "NotIn", "values": [n1]}]
    await env.admin.patch(NOVACOMPUTES, "older", {"spec": {"nodeSelector": {"pool": "elsewhere"}}}, env.ns)
    await env.until(lambda: _phase_is(env, "n1", "younger", "Pending"))

    async def cleared() -> dict[str, Any] | None:
        ds = await env.get(DAEMONSETS, "younger-nova-compute")
        return ds if ds and not any("matchFields" in t for t in _terms(ds)) else None

    ds = await env.until(cleared)
    assert _terms(ds) == [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]


async def _phase_is(env: Env, short: str, pool: str, phase: str) -> bool:
    return await entry_phase(env, short, pool) == phase


def _pool_config_volume(ds: dict[str, Any]) -> str:
    volumes = ds["spec"]["template"]["spec"]["volumes"]
    return str(next(v for v in volumes if v["name"] == "pool-config")["configMap"]["name"])


async def test_a_release_bump_that_drops_an_accepted_option_keeps_the_pool_on_its_config(env: Env) -> None:
    """[libvirt] num_memory_encrypted_guests is in the 2026.1 catalog and gone in 2026.2 (issue 14)."""
    await env.nova()
    await env.admin.patch(
        NOVAS_REF, "nova", {"spec": {"openStackRelease": "2026.1", "image": {"tag": "2026.1"}}}, env.ns
    )
    await env.admin.patch_status(NOVAS_REF, "nova", {"status": {"installedRelease": "2026.1"}}, env.ns)
    await env.node("n1", pool="a", zone="az1")
    await env.pool(extraConfig={"libvirt": {"num_memory_encrypted_guests": "2"}})
    await env.until(lambda: _cond(env, "ConfigReady", "pool", "ConfigRendered"))
    ds = await env.until(lambda: env.get(DAEMONSETS, "pool-nova-compute"))
    good = _pool_config_volume(ds)

    # the Nova moves on to a release without the option: the pool is not stopped
    await env.admin.patch(
        NOVAS_REF, "nova", {"spec": {"openStackRelease": "2026.2", "image": {"tag": "2026.2"}}}, env.ns
    )
    await env.admin.patch_status(NOVAS_REF, "nova", {"status": {"installedRelease": "2026.2"}}, env.ns)
    await env.settle(1.0)
    cond = await env.condition("ConfigReady")
    assert cond is not None
    assert cond["reason"] == "ConfigRendered", cond
    assert await env.events("ConfigError") == []

    # an edit of extraConfig is checked against 2026.2: refused, and the pool keeps running on its config
    await env.admin.patch(
        NOVACOMPUTES,
        "pool",
        {"spec": {"extraConfig": {"libvirt": {"live_migration_permit_auto_converge": "true"}}}},
        env.ns,
    )
    cond = await env.until(lambda: _cond(env, "ConfigReady", "pool", "ConfigError"))
    assert "num_memory_encrypted_guests" in cond["message"]
    assert f"keeps running on ConfigMap {good}" in cond["message"]
    # the pass goes on: a node joining the pool is taken into the ledger and the DaemonSet stays on the config
    await env.node("n2", pool="a", zone="az1")
    await env.until(lambda: _phase_is(env, "n2", "pool", "Pending"))
    ds = await env.get(DAEMONSETS, "pool-nova-compute")
    assert ds is not None
    assert _pool_config_volume(ds) == good
