"""The CPU one list of Secrets costs the Secrets informer's admission (issue 36 §5, "Secret caching cost").

``python tools/bench/secret_admission.py [--pools 300] [--secrets 3000]``

The operator's two controllers are registered on a manager without an API server; one Nova and
``--pools`` NovaComputes are put in their caches, and ``--secrets`` small Secrets that nobody reads
(Helm releases, say) are passed through the Secrets informer's transform, as one LIST of the
namespace would. Printed: the CPU seconds that took, per Secret, and the stored objects decoded.
Not a test: it prints figures; nothing is asserted (the unit test
``tests/unit/reconcilers/test_secret_admission_cost.py`` counts the decodes).
"""

from __future__ import annotations

import argparse
import time
from typing import Any, cast

from nova_operator.kube import Kube
from nova_operator.kube.resources import NOVACOMPUTES, NOVAS, SECRETS
from nova_operator.metrics import Metrics
from nova_operator.reconcilers.compute.context import ComputeSettings
from nova_operator.reconcilers.compute.controller import make_controller
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.reconcilers.nova.controller import make_controller_factory
from nova_operator.runtime import cache as cache_module
from nova_operator.runtime.manager import Manager

NS = "bench"


class _NoKube:
    def __init__(self) -> None:
        self.metrics = Metrics()


def _nova() -> dict[str, Any]:
    return {
        "apiVersion": NOVAS.api_version,
        "kind": "Nova",
        "metadata": {"name": "nova", "namespace": NS, "resourceVersion": "1", "uid": "nova"},
        "spec": {"serviceUser": {"secretRef": {"name": "service-user"}}},
    }


def _pool(index: int) -> dict[str, Any]:
    return {
        "apiVersion": NOVACOMPUTES.api_version,
        "kind": "NovaCompute",
        "metadata": {"name": f"pool-{index}", "namespace": NS, "resourceVersion": "1", "uid": f"p{index}"},
        "spec": {"novaRef": {"name": "nova"}, "secretConfig": {"secretRef": {"name": f"extra-{index}"}}},
    }


def _secret(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"sh.helm.release.v1.app-{index}.v1", "namespace": NS, "resourceVersion": "1"},
        "data": {"release": "SDRzSUFBQUFBQUFBLw=="},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=300)
    parser.add_argument("--secrets", type=int, default=3000)
    args = parser.parse_args()
    manager = Manager(cast(Kube, _NoKube()))
    make_controller_factory(NovaOptions())(manager)
    make_controller(manager, ComputeSettings())
    manager.informer(NOVAS).cache.upsert(_nova())
    for index in range(args.pools):
        manager.informer(NOVACOMPUTES).cache.upsert(_pool(index))
    secrets = next(inf for inf in manager.informers if inf.ref == SECRETS)
    batch = [_secret(index) for index in range(args.secrets)]
    decoded = 0
    real = cache_module.decode

    def counting(entry: Any) -> Any:
        nonlocal decoded
        decoded += 1
        return real(entry)

    cache_module.decode = counting
    start = time.process_time()
    for obj in batch:
        secrets.transform.apply(obj)
    cpu = time.process_time() - start
    cache_module.decode = real
    print(
        f"{args.secrets} Secrets beside {args.pools} pools: {cpu:.3f} CPU-s "
        f"({cpu / max(args.secrets, 1) * 1e6:.1f} µs per Secret), {decoded} stored objects decoded"
    )


if __name__ == "__main__":
    main()
