"""The nova image builder (tools/realnova/images.py): the image contract is checked in the tree as
the container sees it, symbolic links followed inside the container's view."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
from types import ModuleType

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "realnova_images", REPO / "tools" / "realnova" / "images.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


images = _builder()
CONTRACT = json.loads(
    subprocess.run(
        [sys.executable, str(REPO / "nova_operator" / "image_contract.py"), "json"],
        check=True,
        capture_output=True,
    ).stdout
)
PATH = ["/var/lib/openstack/bin", "/usr/sbin", "/usr/bin"]


def _tree(root: pathlib.Path, *, alternatives: bool) -> pathlib.Path:
    """A tree with everything the contract names; ``awk`` reached through /etc/alternatives as on Debian."""
    (root / "usr").mkdir(parents=True)
    for link in images.MERGED_USR_LINKS:
        (root / link).symlink_to(f"usr/{link}")
    bindir = root / "var/lib/openstack/bin"
    bindir.mkdir(parents=True)
    (root / "var/lib/openstack/etc/nova").mkdir(parents=True)
    (root / "var/lib/openstack/etc/nova/api-paste.ini").write_text("[composite:osapi_compute]\n")
    for b in CONTRACT["binaries"]:
        name = b["name"]
        target = root / name.lstrip("/") if name.startswith("/") else bindir / name
        if name in ("awk",):
            continue
        if str(target).startswith(str(root / "bin")):  # /bin/sh: the host's, through /usr
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("#!/bin/sh\n")
        target.chmod(0o755)
    (bindir / "awk").symlink_to("/etc/alternatives/awk")
    if alternatives:
        (root / "etc/alternatives").mkdir(parents=True)
        (root / "etc/alternatives/awk").symlink_to("/usr/bin/mawk")
    return root


@pytest.fixture
def host_usr(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    usr = tmp_path / "host-usr"
    for rel in ("bin/sh", "bin/mawk"):
        (usr / rel).parent.mkdir(parents=True, exist_ok=True)
        (usr / rel).write_text("#!/bin/sh\n")
        (usr / rel).chmod(0o755)
    (usr / "share/novnc").mkdir(parents=True)
    monkeypatch.setattr(images, "HOST_USR", usr)
    return usr


def test_a_tree_with_what_the_contract_names_passes(tmp_path: pathlib.Path, host_usr: pathlib.Path) -> None:
    root = _tree(tmp_path / "root", alternatives=True)
    assert images.check(root, CONTRACT, PATH) == []


def test_a_link_through_etc_alternatives_is_followed_in_the_image_not_on_the_host(
    tmp_path: pathlib.Path, host_usr: pathlib.Path
) -> None:
    root = _tree(tmp_path / "root", alternatives=False)
    assert images.check(root, CONTRACT, PATH) == ["binary awk (db-sync)"]


def test_every_missing_path_and_binary_is_named(tmp_path: pathlib.Path, host_usr: pathlib.Path) -> None:
    root = _tree(tmp_path / "root", alternatives=True)
    (root / "var/lib/openstack/etc/nova/api-paste.ini").unlink()
    (root / "var/lib/openstack/bin/nova-amqp-ready").unlink()
    (host_usr / "share/novnc").rmdir()
    missing = images.check(root, CONTRACT, PATH)
    assert any("api-paste.ini" in m for m in missing)
    assert any("/usr/share/novnc" in m for m in missing)
    assert any("nova-amqp-ready" in m for m in missing)
    assert len(missing) == 3


def test_resolve_maps_the_merged_usr_links_to_the_host(
    tmp_path: pathlib.Path, host_usr: pathlib.Path
) -> None:
    root = tmp_path / "root"
    assert images.resolve(root, "/bin/sh") == host_usr / "bin" / "sh"
    assert images.resolve(root, "/usr/share/novnc") == host_usr / "share" / "novnc"
    assert images.resolve(root, "/var/lib/openstack/bin") == root / "var/lib/openstack/bin"


def test_an_unknown_release_is_refused() -> None:
    with pytest.raises(SystemExit, match="unknown release"):
        images.releases(["1999.1"])


def _imports_from(lib: pathlib.Path) -> str:
    """``python -v``'s account of importing ``mod`` from ``lib`` as the image does: every file's
    time 0 (the layer's), nothing written (a read-only root)."""
    for path in lib.rglob("*"):
        os.utime(path, (0, 0))
    done = subprocess.run(
        [sys.executable, "-v", "-c", "import mod"],
        env={**os.environ, "PYTHONPATH": str(lib), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stderr


def test_byte_compiled_modules_are_used_from_a_layer_whose_times_are_zero(tmp_path: pathlib.Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "mod.py").write_text("VALUE = 1\n")
    # as pip leaves a venv: .pyc files that record their sources' modification times
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(lib)], check=True)
    assert "bytecode is stale for 'mod'" in _imports_from(lib)

    images.byte_compile(pathlib.Path(sys.executable), lib)
    said = _imports_from(lib)
    assert "bytecode is stale" not in said, said
    assert f"{importlib.util.cache_from_source(str(lib / 'mod.py'))} matches {lib / 'mod.py'}" in said, said


def test_a_module_that_does_not_compile_fails_the_tree(tmp_path: pathlib.Path) -> None:
    (tmp_path / "broken.py").write_text("def (:\n")
    with pytest.raises(SystemExit, match="compileall failed"):
        images.byte_compile(pathlib.Path(sys.executable), tmp_path)
