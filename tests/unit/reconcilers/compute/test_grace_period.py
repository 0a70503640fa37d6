"""The pool's DaemonSet stops nova-compute within its installed release's own bound (issue 38 item 4)."""

from __future__ import annotations

import pytest

from nova_operator.reconcilers.compute.daemon_set import reconcile_daemon_set
from tests.unit.reconcilers.compute.fakes import FailingKube, daemonset_pass


@pytest.mark.parametrize(("installed", "grace"), [("2025.2", 80), ("2026.1", 200), ("2026.2", 200)])
async def test_the_grace_period_follows_the_novas_installed_release(installed: str, grace: int) -> None:
    kube = FailingKube()
    p = daemonset_pass(kube)
    assert p.nova is not None
    p.nova.setdefault("status", {})["installedRelease"] = installed
    await reconcile_daemon_set(p)
    (applied,) = kube.applied
    assert applied["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == grace
