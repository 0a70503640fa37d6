"""``make run``'s background build of the other releases' nova images (issue 37 item 5): what it starts,
and what it hands the kubelet stand-in once the build has ended."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field
from typing import Any

import pytest
from prepare import plans
from simcluster.realtier import release_images
from simcluster.realtier.release_images import ReleaseImages


@dataclass
class Popen:
    returncode: int | None = None


@dataclass
class Process:
    popen: Popen = field(default_factory=Popen)
    log: pathlib.Path = pathlib.Path("/tmp/release-images.log")

    @property
    def alive(self) -> bool:
        return self.popen.returncode is None


@dataclass
class Kubelet:
    added: list[dict[str, Any]] = field(default_factory=list)

    def add_images(self, images: dict[str, Any]) -> None:
        self.added.append(images)


@dataclass
class Real:
    kubelet: Kubelet = field(default_factory=Kubelet)


@dataclass
class Handle:
    real: Real = field(default_factory=Real)
    spawned: list[tuple[str, list[str]]] = field(default_factory=list)
    process: Process = field(default_factory=Process)

    def spawn(self, name: str, argv: list[str], **kw: Any) -> Process:
        self.spawned.append((name, list(argv)))
        return self.process


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []

    def nova_images(releases: list[str]) -> dict[str, str]:
        calls.append(list(releases))
        return {f"ghcr.io/c5c3/nova:{r}": f"tree-{r}" for r in releases}

    monkeypatch.setattr(release_images, "nova_images", nova_images)
    return calls


def test_the_supported_releases_are_the_catalogs() -> None:
    assert release_images.supported() == plans.all_releases()
    assert len(release_images.supported()) > 1


def test_the_other_releases_are_built_in_one_low_priority_process_and_served_when_it_ends(
    built: list[list[str]],
) -> None:
    handle = Handle()
    images = ReleaseImages.start(handle, ["2026.1", "2026.2"])  # type: ignore[arg-type]
    [(name, argv)] = handle.spawned
    assert name == "release-images"
    assert argv[:3] == ["nice", "-n", "10"]
    assert argv[-2:] == ["2026.1", "2026.2"]
    assert "ensure_venvs.sh" in " ".join(argv)
    assert "images.py" in " ".join(argv)
    assert images.poll() is None  # still building: nothing served, nothing said
    assert handle.real.kubelet.added == []
    handle.process.popen.returncode = 0
    line = images.poll()
    assert line is not None
    assert "2026.1, 2026.2 are served" in line
    assert built == [["2026.1", "2026.2"]]
    assert handle.real.kubelet.added == [
        {"ghcr.io/c5c3/nova:2026.1": "tree-2026.1", "ghcr.io/c5c3/nova:2026.2": "tree-2026.2"}
    ]
    assert images.poll() is None  # said once


def test_a_failed_build_is_said_once_and_serves_nothing(built: list[list[str]]) -> None:
    handle = Handle()
    images = ReleaseImages.start(handle, ["2026.1"])  # type: ignore[arg-type]
    handle.process.popen.returncode = 2
    line = images.poll()
    assert line is not None
    assert "could not be built (exit 2" in line
    assert "ErrImagePull" in line
    assert handle.real.kubelet.added == []
    assert built == []
    assert images.poll() is None


def test_no_other_release_starts_nothing(built: list[list[str]]) -> None:
    handle = Handle()
    images = ReleaseImages.start(handle, [])  # type: ignore[arg-type]
    assert handle.spawned == []
    assert images.process is None
    assert images.poll() is None
