"""Issue 36 §5, "Secret caching cost": whether a Secret's data is kept is an index lookup.

The Secrets informer asks its users' predicates (``secret_reads.reads``, ``compute.controller.pool_reads``)
of every Secret it receives. Deciding it by decoding the namespace's pools made one list of 3,000
Secrets beside 300 pools cost 17 to 23 CPU-s. Here the work is counted, not timed: the stored
objects decoded while the informer's transform judges a Secret, at 1 pool and at 300 pools.
"""

from __future__ import annotations

import copy
from typing import Any, cast

import pytest

from nova_operator.kube import Kube
from nova_operator.kube.resources import NOVACOMPUTES, NOVAS, SECRETS
from nova_operator.metrics import Metrics
from nova_operator.reconcilers.compute.context import ComputeSettings
from nova_operator.reconcilers.compute.controller import make_controller
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.reconcilers.nova.controller import make_controller_factory
from nova_operator.renderers import compute_pool
from nova_operator.runtime import cache as cache_module
from nova_operator.runtime.manager import Manager
from tests.novas import nova_object

NS = "ns"

SECRETS_PER_LOOK = 50


class NoKube:
    def __init__(self) -> None:
        self.metrics = Metrics()


def pool(index: int) -> dict[str, Any]:
    return {
        "apiVersion": NOVACOMPUTES.api_version,
        "kind": "NovaCompute",
        "metadata": {"name": f"pool-{index}", "namespace": NS, "resourceVersion": "1", "uid": f"p-{index}"},
        "spec": {"novaRef": {"name": "nova"}, "secretConfig": {"secretRef": {"name": f"pool-{index}-extra"}}},
    }


def secret(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS, "resourceVersion": "1", "uid": f"u-{name}"},
        "data": {"key": "dmFsdWU="},
    }


def decodes_per_secret(monkeypatch: pytest.MonkeyPatch, pools: int) -> tuple[float, dict[str, bool]]:
    """Decodes of stored objects per Secret judged, beside ``pools`` pools; and some verdicts."""
    manager = Manager(cast(Kube, NoKube()))
    make_controller_factory(NovaOptions())(manager)
    make_controller(manager, ComputeSettings())
    manager.informer(NOVAS).cache.upsert(nova_object(NS))
    for index in range(pools):
        manager.informer(NOVACOMPUTES).cache.upsert(pool(index))
    secrets = next(inf for inf in manager.informers if inf.ref == SECRETS)
    decoded = 0
    real = cache_module.decode

    def counting(entry: Any) -> Any:
        nonlocal decoded
        decoded += 1
        return real(entry)

    monkeypatch.setattr(cache_module, "decode", counting)
    try:
        for index in range(SECRETS_PER_LOOK):
            secrets.transform.apply(secret(f"helm-release-{index}"))
        names = {
            "secretConfig of the first pool": "pool-0-extra",
            "derived Secret of the last pool": compute_pool.secret_config_name(f"pool-{pools - 1}"),
            "contract": "nova-compute-config",
            "service user": "service-user",
            "unrelated": "unrelated",
        }
        verdicts = {what: secrets.transform.apply(secret(name))[1] for what, name in names.items()}
    finally:
        monkeypatch.setattr(cache_module, "decode", real)
    return decoded / SECRETS_PER_LOOK, verdicts


def test_judging_a_secret_decodes_no_pool_whatever_their_number(monkeypatch: pytest.MonkeyPatch) -> None:
    one, verdicts_one = decodes_per_secret(monkeypatch, 1)
    many, verdicts_many = decodes_per_secret(monkeypatch, 300)
    assert many == one == 0, f"decodes per Secret judged: {one} beside 1 pool, {many} beside 300 pools"
    expected = {what: what != "unrelated" for what in verdicts_one}
    assert verdicts_one == verdicts_many == expected


def test_a_pool_edit_moves_what_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    manager = Manager(cast(Kube, NoKube()))
    make_controller(manager, ComputeSettings())
    pools = manager.informer(NOVACOMPUTES).cache
    pools.upsert(pool(0))
    secrets = next(inf for inf in manager.informers if inf.ref == SECRETS)
    assert secrets.transform.apply(secret("pool-0-extra"))[1]
    edited = copy.deepcopy(pool(0))
    edited["spec"]["secretConfig"]["secretRef"]["name"] = "other-extra"
    pools.upsert(edited)
    assert not secrets.transform.apply(secret("pool-0-extra"))[1]
    assert secrets.transform.apply(secret("other-extra"))[1]
