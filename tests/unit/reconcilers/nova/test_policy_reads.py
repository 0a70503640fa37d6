"""The policy ConfigMaps cache keeps the data of the ConfigMap a Nova's spec.policy names, no more.

``policy_reads.reads`` admits the ConfigMaps a Nova names; the others of a covered namespace are held
as references; a Nova that stops naming one has it narrowed again (``secret_reads.Narrower``). A
converged pass reading it from the cache runs on the real API server
(``tests/integration/nova/test_policy_cache.py``).
"""

from __future__ import annotations

import base64
import copy
from typing import Any, cast

from nova_operator.kube.resources import CONFIGMAPS, NOVAS
from nova_operator.reconcilers.nova.policy_reads import (
    POLICY_INDEX,
    POLICY_MAP_BOUND,
    config_map_data_size,
    names_one,
    policy_config_map,
    read_keys,
    reads,
    wakes,
)
from nova_operator.reconcilers.nova.secret_reads import Narrower
from nova_operator.runtime.informer import Informer
from nova_operator.runtime.request import Request
from nova_operator.runtime.transform import ALL
from tests.novas import nova_object

NS = "ns"


def config_map(name: str, text: str = '"a": "b"', rv: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "resourceVersion": rv, "uid": f"u-{name}"},
        "data": {"policy.yaml": text},
    }


def naming(name: str | None) -> dict[str, Any]:
    nova = copy.deepcopy(nova_object(NS))
    if name is not None:
        nova["spec"]["policy"] = {"configMapRef": {"name": name}}
    return nova


def informer(ref: Any) -> Informer:
    """An informer whose events the test delivers (``_apply``); it never lists nor watches."""
    return Informer(cast(Any, None), ref)


def test_only_the_named_config_map_is_read_and_wakes_its_nova() -> None:
    novas = informer(NOVAS)
    novas.cache.add_index(POLICY_INDEX, policy_config_map)
    novas._apply("ADDED", naming("policy"))
    assert read_keys(naming("policy")) == {Request(NS, "policy")}
    assert read_keys(naming(None)) == set()
    assert names_one(naming("policy"))
    assert not names_one(naming(None))  # its namespace's ConfigMaps are not listed for it
    assert reads(novas.cache)(config_map("policy"))
    assert not reads(novas.cache)(config_map("other"))
    assert list(wakes(novas.cache)(config_map("policy"))) == [Request(NS, "nova")]
    assert list(wakes(novas.cache)(config_map("other"))) == []


def test_a_config_map_a_nova_stops_naming_is_narrowed_at_once() -> None:
    novas = informer(NOVAS)
    novas.cache.add_index(POLICY_INDEX, policy_config_map)
    maps = informer(CONFIGMAPS)
    maps.keep(ALL, when=reads(novas.cache))
    novas.add_handler(Narrower(maps, keys=read_keys))
    nova = naming("policy")
    novas._apply("ADDED", copy.deepcopy(nova))
    for name in ("policy", "helm-values"):
        maps._apply("ADDED", config_map(name))
    assert [k.name for k in maps.cache.list_keys() if maps.cache.withheld(k)] == ["helm-values"]
    assert "data" not in (maps.cache.get("helm-values", NS) or {})
    edited = naming(None)
    edited["metadata"]["resourceVersion"] = "2"
    novas._apply("MODIFIED", edited)
    assert maps.cache.withheld(Request(NS, "policy"))
    assert "data" not in (maps.cache.get("policy", NS) or {})


def test_a_named_config_map_over_the_bound_is_not_held_whole() -> None:
    binary = {"binaryData": {"b": base64.b64encode(b"x" * 30).decode()}}
    assert config_map_data_size({**config_map("p", "é"), **binary}) == 2 + 30
    novas = informer(NOVAS)
    novas.cache.add_index(POLICY_INDEX, policy_config_map)
    novas._apply("ADDED", naming("policy"))
    maps = informer(CONFIGMAPS)
    maps.keep(ALL, when=reads(novas.cache))
    maps.bound(POLICY_MAP_BOUND)
    maps._apply("ADDED", config_map("policy", "x" * (POLICY_MAP_BOUND.per_object + 1)))
    assert maps.cache.withheld(Request(NS, "policy"))  # a pass reads it with a GET, not kept
    assert maps.cache.oversize("policy", NS) == POLICY_MAP_BOUND.per_object + 1
