"""The sub-reconcilers: one module per step, each declaring the condition it reports on.

``NOVA_STEPS`` is the ordered Nova pipeline as data (reconciler.md §3): twelve sequential
steps, then the concurrent group ``NOVA_GROUP``. The lists live in
``nova_operator.reconcilers.nova_steps`` and are imported lazily here, so importing a single
step module (or ``common``) never drags in the whole pipeline. The NovaCompute controller's
steps live in ``nova_operator.reconcilers.compute`` and are re-exported here as ``NOVACOMPUTE_STEPS``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NOVACOMPUTE_STEPS", "NOVA_GROUP", "NOVA_STEPS"]


def __getattr__(name: str) -> Any:
    if name in ("NOVA_STEPS", "NOVA_GROUP"):
        from nova_operator.reconcilers import nova_steps

        return getattr(nova_steps, name)
    if name == "NOVACOMPUTE_STEPS":
        from nova_operator.reconcilers import compute

        return compute.NOVACOMPUTE_STEPS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
