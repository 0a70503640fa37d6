"""The PoolConfig step's option-catalog check (§4.2, run in the reconciler: there is no webhook)."""

from __future__ import annotations

from typing import Any

from nova_operator import conditions
from nova_operator.naming import CONFIG_BASE_LABEL
from nova_operator.reconcilers.compute import pool_config
from nova_operator.reconcilers.compute.pool_config import catalog_problems, reconcile_pool_config
from nova_operator.renderers import compute_pool
from tests.unit.reconcilers.compute.fakes import (
    owned_config_map,
    pool_pass,
)


def test_known_options_and_owned_keys_pass() -> None:
    extra = {
        "libvirt": {"live_migration_permit_auto_converge": "true", "virt_type": "qemu"},
        "DEFAULT": {"debug": "true", "host": "x"},  # host is owned: exempt from the scan
    }
    assert catalog_problems("2025.2", extra) == []


def test_unknown_option_and_section_are_named() -> None:
    problems = catalog_problems("2025.2", {"libvirt": {"no_such_knob": "1"}, "nosuchsection": {"k": "v"}})
    assert problems == [
        "spec.extraConfig[libvirt][no_such_knob]: no such option in the nova 2025.2 option catalog",
        "spec.extraConfig[nosuchsection][k]: no such section in the nova 2025.2 option catalog",
    ]


def test_a_release_without_catalog_refuses_every_key() -> None:
    """Issue 13 item 9: without a catalog nothing can be checked, so nothing is let through."""
    (problem,) = catalog_problems("2099.1", {"libvirt": {"no_such_knob": "1"}})
    assert "release 2099.1 ships no option catalog" in problem
    assert "[libvirt] no_such_knob" in problem
    assert catalog_problems("", {"libvirt": {"no_such_knob": "1"}}) == []  # no release: nothing to run
    assert catalog_problems("2025.2", None) == []


# -- the check runs when extraConfig changes, not on every pass (a release bump keeps the pool) --------

DROPPED = {"libvirt": {"num_memory_encrypted_guests": "2"}}  # in 2026.1, gone in 2026.2


def daemonset_mounting(p: Any, config_map: str) -> dict[str, Any]:
    volumes = [{"name": "pool-config", "configMap": {"name": config_map}}]
    return {
        "metadata": {"name": compute_pool.daemonset_name(p.name)},
        "spec": {"template": {"spec": {"volumes": volumes}}},
    }


async def test_a_release_bump_that_drops_an_accepted_option_keeps_the_pool_running() -> None:
    p, events, kube = pool_pass(DROPPED, "2026.1", {})
    cm = owned_config_map(p)
    p, events, kube = pool_pass(DROPPED, "2026.2", {("configmaps", cm["metadata"]["name"]): cm})
    result = await reconcile_pool_config(p)
    assert result.requeue_after is None
    assert p.condition(conditions.CONFIG_READY)["reason"] == "ConfigRendered"  # type: ignore[index]
    assert p.config_map == cm["metadata"]["name"]
    assert "ConfigError" not in events.reasons()
    assert kube.created == []  # nothing new was written


async def test_a_refused_edit_keeps_the_last_good_config_and_the_pass_goes_on() -> None:
    p, events, kube = pool_pass(DROPPED, "2026.2", {})
    ds = daemonset_mounting(p, "rack7-config-0123abcd")
    p.cached = lambda ref, ns, name: (
        ds if (ref.plural, name) == ("daemonsets", ds["metadata"]["name"]) else None
    )
    result = await reconcile_pool_config(p)
    assert result.requeue_after is None  # the DaemonSet and drain steps run on
    cond = p.condition(conditions.CONFIG_READY)
    assert cond is not None
    assert cond["status"] == "False"
    assert cond["reason"] == "ConfigError"
    assert "[libvirt][num_memory_encrypted_guests]" in cond["message"]
    assert "keeps running on ConfigMap rack7-config-0123abcd" in cond["message"]
    assert p.config_map == "rack7-config-0123abcd"
    assert p.contract_hash
    assert kube.created == []
    await reconcile_pool_config(p)
    assert events.reasons() == ["ConfigError"]  # once per distinct message


async def test_a_new_pool_with_a_refused_config_waits_and_writes_nothing() -> None:
    p, _events, kube = pool_pass(DROPPED, "2026.2", {})
    result = await reconcile_pool_config(p)
    assert result.requeue_after == 15.0
    assert p.condition(conditions.CONFIG_READY)["reason"] == "ConfigError"  # type: ignore[index]
    assert p.config_map == ""
    assert kube.created == []


async def test_an_accepted_option_on_a_release_that_knows_it_is_rendered() -> None:
    p, _events, kube = pool_pass(DROPPED, "2026.1", {})
    assert (await reconcile_pool_config(p)).requeue_after is None
    assert p.condition(conditions.CONFIG_READY)["reason"] == "ConfigRendered"  # type: ignore[index]
    assert [c["metadata"]["name"] for c in kube.created] == [p.config_map]


def test_keys_are_checked_as_oslo_config_reads_them() -> None:
    """Issue 13 item 9: a section in another case, or a key with ':' / '=', is the option oslo reads."""
    assert catalog_problems("2025.2", {"LIBVIRT": {"virt_type": "qemu"}}) == []  # == [libvirt] virt_type
    assert catalog_problems("2025.2", {"DEFAULT": {"debug: true": "x"}}) == []  # oslo reads "debug"
    assert catalog_problems("2025.2", {"Libvirt": {"no_such_knob": "1"}}) != []


def historical(p: Any, name: str, created: str, *, uid: str = "u1") -> dict[str, Any]:
    base = compute_pool.config_base(p.name)
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "creationTimestamp": created,
            "labels": {CONFIG_BASE_LABEL: base},
            "ownerReferences": [{"uid": uid, "controller": True, "kind": "NovaCompute", "name": p.name}],
        }
    }


async def test_old_pool_config_maps_are_pruned_from_the_cache_without_a_list() -> None:
    p, _, kube = pool_pass({}, "2025.2", {})
    olds = [historical(p, f"old-{i}", f"2026-01-0{i}T00:00:00Z") for i in range(1, 6)]
    foreign = historical(p, "not-ours", "2026-01-01T00:00:00Z", uid="someone-else")
    for cm in [*olds, foreign]:
        kube.objects[("configmaps", cm["metadata"]["name"])] = cm
    asked: list[tuple[str, str, dict[str, str]]] = []

    def listed(ref: Any, namespace: str, labels: Any) -> list[dict[str, Any]]:
        asked.append((ref.plural, namespace, dict(labels)))
        return [*olds, foreign]

    p.listed = listed
    await pool_config._prune(p, "current")
    assert kube.lists == 0  # read from the informer: a converged pass lists nothing
    assert asked == [("configmaps", "ns", {CONFIG_BASE_LABEL: compute_pool.config_base_label(p.name)})]
    assert sorted(kube.deleted) == [("configmaps", "old-1"), ("configmaps", "old-2")]  # the 3 newest stay


async def test_without_a_cache_for_the_namespace_the_prune_lists() -> None:
    p, _, kube = pool_pass({}, "2025.2", {})
    await pool_config._prune(p, "current")  # the default lookup: not cached
    assert kube.lists == 1
