"""The verbs the Nova controller declares are granted by the generated ClusterRole (and are real verbs)."""

from __future__ import annotations

from nova_operator.kube.resources import ACCESS
from nova_operator.reconcilers.nova.controller import RBAC_NEEDS


def _granted() -> dict[str, set[str]]:
    granted: dict[str, set[str]] = {}
    for access in ACCESS:
        granted.setdefault(str(access.ref), set()).update(access.verbs)
        for sub, verbs in access.subresources:
            granted.setdefault(f"{access.ref}/{sub}", set()).update(verbs)
    return granted


def test_every_verb_the_nova_controller_needs_is_granted() -> None:
    granted = _granted()
    missing = {r: sorted(set(v) - granted.get(r, set())) for r, v in RBAC_NEEDS.items()}
    assert {r: v for r, v in missing.items() if v} == {}
