"""Which of the user's ConfigMaps the Nova controller reads: the one ``spec.policy.configMapRef`` names.

The same mechanism as the Secrets a Nova names (``secret_reads``): the ConfigMaps informer covers
the namespaces in which a Nova names a ConfigMap (``names_one``, ``runtime.scoped``: a namespace
whose Novas name none is never listed), and keeps the data of a ConfigMap only while a Nova names it
(``reads``, a conditional declaration of ``runtime.transform``); every other ConfigMap of the
namespace is a reference (name, version, owners), so its edits still count but its content is not
held. A ConfigMap named after it was stored is read once by the pass that needs it and handed to the
cache (``Cache.fill``); one no Nova names any more is narrowed again (``secret_reads.Narrower``). The
cache is bounded like the Secrets one (``POLICY_MAP_BOUND``): one over the bound is read per pass.
So a converged pass over a Nova with a policy ConfigMap reads it from the cache: no request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from nova_operator.kube.types import Object
from nova_operator.runtime.cache import Bound, Cache
from nova_operator.runtime.request import Request
from nova_operator.secret_refs import NAMESPACE_SECRET_DATA_LIMIT, SECRET_DATA_LIMIT

POLICY_INDEX: Final = "nova.spec.policy.configMapRef.name"
"""Novas by ``<namespace>/<name>`` of the ConfigMap their ``spec.policy.configMapRef`` names."""


def config_map_data_size(config_map: Mapping[str, Any]) -> int:
    """The bytes a ConfigMap's ``data`` (UTF-8) and ``binaryData`` (decoded from its base64 length) hold."""
    size = 0
    data = config_map.get("data")
    if isinstance(data, Mapping):
        size += sum(len(v.encode("utf-8")) for v in data.values() if isinstance(v, str))
    binary = config_map.get("binaryData")
    if isinstance(binary, Mapping):
        size += sum(len(v) * 3 // 4 for v in binary.values() if isinstance(v, str))
    return size


POLICY_MAP_BOUND: Final = Bound(config_map_data_size, SECRET_DATA_LIMIT, NAMESPACE_SECRET_DATA_LIMIT)
"""What the policy ConfigMaps cache holds with data: 256 KiB a ConfigMap, 4 MiB a namespace."""


def policy_config_map(nova: Mapping[str, Any]) -> list[str]:
    """The ``POLICY_INDEX`` value of a Nova (none without ``spec.policy.configMapRef``)."""
    namespace = (nova.get("metadata") or {}).get("namespace") or ""
    ref = (((nova.get("spec") or {}).get("policy") or {}).get("configMapRef")) or {}
    return [f"{namespace}/{ref['name']}"] if isinstance(ref, Mapping) and ref.get("name") else []


def names_one(nova: Mapping[str, Any]) -> bool:
    """Whether a Nova names a policy ConfigMap: the ConfigMaps informer covers the namespaces of those
    only (``ScopedInformer.follow``), so a namespace whose Novas name none is never listed."""
    return bool(policy_config_map(nova))


def read_keys(nova: Mapping[str, Any]) -> set[Request]:
    """The ConfigMap a Nova names, as a cache key (empty: it names none)."""
    return {Request(*value.split("/", 1)) for value in policy_config_map(nova)}


def reads(novas: Cache) -> Callable[[Object], bool]:
    """Whether a Nova names the ConfigMap (one index lookup)."""

    def admits(config_map: Object) -> bool:
        meta = config_map.get("metadata") or {}
        return novas.indexed(POLICY_INDEX, f"{meta.get('namespace') or ''}/{meta.get('name') or ''}")

    return admits


def wakes(novas: Cache) -> Callable[[Object], Iterable[Request]]:
    """A ConfigMap wakes the Novas whose ``spec.policy.configMapRef`` names it (issue 38 item 3)."""

    def mapper(config_map: Object) -> list[Request]:
        meta = config_map.get("metadata") or {}
        return novas.keys_by_index(POLICY_INDEX, f"{meta.get('namespace') or ''}/{meta.get('name', '')}")

    return mapper
