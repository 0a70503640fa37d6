"""A simulated cluster without kwok (the real-Nova tier, ``make run``): it needs no kwok binary, so
``ENVTEST_NO_KWOK=1 tools/envtest/build.sh`` is enough, and it refuses fake nodes it cannot run."""

from __future__ import annotations

from pathlib import Path

import pytest
from simcluster.platform.cluster import SIM_BINARIES, SimCluster
from simcluster.platform.controlplane import ControlPlaneError


def _bindir(tmp_path: Path, names: tuple[str, ...]) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir(parents=True)
    for name in names:
        (bindir / name).touch()
    return bindir


def test_a_cluster_without_kwok_needs_no_kwok_binary_and_refuses_fake_nodes(tmp_path: Path) -> None:
    bindir = _bindir(tmp_path, ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"))
    cluster = SimCluster(tmp_path / "work", bindir, kwok=False)
    with pytest.raises(ControlPlaneError, match="no kwok"):
        cluster.create_nodes(1)


def test_each_cluster_still_needs_the_binaries_it_runs(tmp_path: Path) -> None:
    bindir = _bindir(tmp_path, tuple(b for b in SIM_BINARIES if not b.startswith("kwok")))
    with pytest.raises(ControlPlaneError, match=r"lacks kwok, kwok-stages\.yaml"):
        SimCluster(tmp_path / "work", bindir)
    with pytest.raises(ControlPlaneError, match="lacks kube-controller-manager, kube-scheduler:"):
        SimCluster(tmp_path / "work", _bindir(tmp_path / "core", ("etcd", "kube-apiserver")), kwok=False)
