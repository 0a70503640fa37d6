"""config/rbac grants exactly the verbs the code declares it sends: no more, no less.

Each controller (and leader election) declares its needs per resource; the integration
tests check that every request they see is declared. This test closes the loop: the
ClusterRole rendered from ``kube.resources.ACCESS`` is the union of the declarations.
"""

from __future__ import annotations

from collections import defaultdict

from nova_operator.kube.resources import ACCESS
from nova_operator.reconcilers.compute import controller as novacompute
from nova_operator.reconcilers.nova import controller as nova
from nova_operator.runtime import leaderelection


def _granted() -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for access in ACCESS:
        out[str(access.ref)].update(access.verbs)
        for sub, verbs in access.subresources:
            out[f"{access.ref}/{sub}"].update(verbs)
    return {k: v for k, v in out.items() if v}


def _needed() -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for needs in (nova.RBAC_NEEDS, novacompute.RBAC_NEEDS, leaderelection.RBAC_NEEDS):
        for resource, verbs in needs.items():
            out[resource].update(verbs)
    return dict(out)


def test_the_cluster_role_grants_exactly_what_the_code_declares() -> None:
    granted, needed = _granted(), _needed()
    too_much = {r: sorted(v - needed.get(r, set())) for r, v in granted.items() if v - needed.get(r, set())}
    missing = {r: sorted(v - granted.get(r, set())) for r, v in needed.items() if v - granted.get(r, set())}
    assert too_much == {}, f"granted but never used: {too_much}"
    assert missing == {}, f"used but not granted: {missing}"
