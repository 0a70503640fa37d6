"""Issue 36 §5, "Named Secrets cached in full": what the Secrets cache holds is bounded by size.

Any Secret a Nova names was cached with its data whoever made it (20 Novas naming 400 Secrets of
1 MiB took the operator to 768 MiB). Now a Secret over ``SECRET_DATA_LIMIT`` is never held with its
data and the pass that needs it reports ``SecretTooLarge`` (naming the Secret and the limit, never
the content), and a namespace's Secrets held with data are bounded by ``NAMESPACE_SECRET_DATA_LIMIT``;
``nova_operator_informer_held_bytes{resource="secrets"}`` says how much is held. The pass's refusal
runs on the real API server (``tests/integration/nova/test_secrets.py``).
"""

from __future__ import annotations

import base64
import copy
from typing import Any, cast

from nova_operator.kube import Kube
from nova_operator.kube.resources import NOVAS, SECRETS
from nova_operator.metrics import Metrics
from nova_operator.reconcilers.compute.context import ComputeSettings
from nova_operator.reconcilers.compute.controller import make_controller
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.reconcilers.nova.controller import make_controller_factory
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.informer import Informer
from nova_operator.runtime.manager import Manager
from nova_operator.runtime.request import Request
from nova_operator.secret_refs import NAMESPACE_SECRET_DATA_LIMIT, SECRET_DATA_LIMIT, secret_data_size
from tests.novas import nova_object

NS = "ns"

KIB = 1024
MARKER = "UVVJQ0tCUk9XTkZPWA"  # a recognisable run of base64 in the content, never to be quoted


class NoKube:
    def __init__(self) -> None:
        self.metrics = Metrics()


def big_secret(name: str, size: int) -> dict[str, Any]:
    raw = (base64.b64decode(MARKER + "==") * (size // 13 + 1))[:size]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS, "resourceVersion": "1", "uid": f"u-{name}"},
        "data": {"password": base64.b64encode(raw).decode()},
    }


def novas_naming(count: int) -> list[dict[str, Any]]:
    novas = []
    for index in range(count):
        nova = nova_object(NS)
        nova["metadata"]["name"] = f"nova-{index}"
        nova["spec"]["serviceUser"]["secretRef"]["name"] = f"named-{index}"
        novas.append(nova)
    return novas


def operator_secrets() -> tuple[Informer, Metrics]:
    kube = NoKube()
    manager = Manager(cast(Kube, kube))
    make_controller_factory(NovaOptions())(manager)
    make_controller(manager, ComputeSettings())
    for nova in novas_naming(40):
        manager.informer(NOVAS).cache.upsert(copy.deepcopy(nova))
    secrets = next(inf for inf in manager.informers if inf.ref == SECRETS)
    return secrets, kube.metrics


def receive(secrets: Informer, obj: dict[str, Any]) -> None:
    """What the informer does with a listed or watched Secret: transform, then store."""
    stored, whole = secrets._stored_form(obj)
    secrets.cache.upsert(stored, whole=whole)


def whole_data(cache: Cache) -> int:
    total = 0
    for key in cache.list_keys():
        if not cache.withheld(key):
            total += secret_data_size(cache.get(key.name, key.namespace) or {})
    return total


def test_a_named_secret_over_the_limit_is_held_without_its_data() -> None:
    secrets, _metrics = operator_secrets()
    for index in range(20):
        receive(secrets, big_secret(f"named-{index}", SECRET_DATA_LIMIT + KIB))
    held = [key.name for key in secrets.cache.list_keys() if not secrets.cache.withheld(key)]
    assert held == [], f"{len(held)} Secrets over {SECRET_DATA_LIMIT} bytes held with their data"
    assert whole_data(secrets.cache) == 0
    assert secrets.cache.oversize("named-3", NS) == SECRET_DATA_LIMIT + KIB


def test_the_secrets_held_with_data_in_one_namespace_are_bounded() -> None:
    secrets, metrics = operator_secrets()
    size = 200 * KIB
    for index in range(30):
        receive(secrets, big_secret(f"named-{index}", size))
    held = whole_data(secrets.cache)
    assert held <= NAMESPACE_SECRET_DATA_LIMIT, f"{held} bytes of Secret data held in one namespace"
    assert held == (NAMESPACE_SECRET_DATA_LIMIT // size) * size
    gauge = metrics.registry.get_sample_value("nova_operator_informer_held_bytes", {"resource": "secrets"})
    assert gauge == held
    secrets.cache.remove(Request(NS, "named-0"))  # a Secret deleted: its share is free again
    gauge = metrics.registry.get_sample_value("nova_operator_informer_held_bytes", {"resource": "secrets"})
    assert gauge == held - size
    newer = big_secret("named-29", size)
    newer["metadata"]["resourceVersion"] = "2"
    receive(secrets, newer)
    assert not secrets.cache.withheld(Request(NS, "named-29"))  # its next version fits
