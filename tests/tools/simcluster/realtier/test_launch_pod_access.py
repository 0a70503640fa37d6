"""``launch_real(pod_access=True)``: the control plane starts with the kubelet client and egress flags
of ``realnode.access`` and ServiceAccount admission, and the real nodes get that access and the
extra relayed ports; without it the control plane is as before. Not without real compute nodes."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from realnode.access import KubeletAccess
from simcluster.realtier import launch as realtier_launch


class Handle:
    def __init__(self) -> None:
        self.real: object = object()
        self.startup_seconds = 0.0

    def stop(self) -> None:
        pass


def _launch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path, **kw: Any
) -> tuple[dict[str, Any], list[Any]]:
    launched: dict[str, Any] = {}
    added: list[Any] = []

    def launch(workdir: pathlib.Path, **given: Any) -> Handle:
        launched.update(given, workdir=workdir)
        return Handle()

    def add_real_tier(handle: Handle, *args: Any) -> None:
        added.extend(args)
        handle.real = type("Real", (), {"startup": {}})()

    monkeypatch.setattr(realtier_launch, "nova_images", lambda releases, aliases: {})
    monkeypatch.setattr(realtier_launch, "launch", launch)
    monkeypatch.setattr(realtier_launch, "_add_real_tier", add_real_tier)
    monkeypatch.setattr(
        KubeletAccess, "prepare", lambda self: ["--kubelet-client-certificate=x", "--egress=y"]
    )
    realtier_launch.launch_real(tmp_path, releases=("2025.2",), **kw)
    return launched, added


def test_pod_access_asks_the_control_plane_and_the_nodes_for_what_pods_need(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    launched, added = _launch(
        monkeypatch, tmp_path, real_compute_nodes=True, pod_access=True, relay_ports=(4242,)
    )
    assert launched["service_account_admission"] is True
    assert launched["extra_apiserver_args"] == ["--kubelet-client-certificate=x", "--egress=y"]
    *_, access, relay_ports = added
    assert isinstance(access, KubeletAccess)
    assert access.workdir == tmp_path / "access"
    assert relay_ports == [4242]


def test_without_pod_access_the_control_plane_is_as_before(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    launched, added = _launch(monkeypatch, tmp_path, real_compute_nodes=True)
    assert launched["service_account_admission"] is False
    assert tuple(launched["extra_apiserver_args"]) == ()
    *_, access, relay_ports = added
    assert access is None
    assert relay_ports == []


def test_pod_access_needs_real_compute_nodes(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="real compute nodes"):
        realtier_launch.launch_real(tmp_path, pod_access=True)
