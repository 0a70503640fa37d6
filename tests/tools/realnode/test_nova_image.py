"""The nova image follows the image contract (``nova_operator.image_contract``, the single source):
its user, paths and programs come from it, and ``check`` finds what a layer set lacks. Small
synthetic layers stand in for Debian's and the venv's (the real ones: tests/realnode)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
import tarfile

import pytest
from realnode import nova_image

from nova_operator import image_contract as contract

PATH_ENV = f"{contract.OPENSTACK_PREFIX}/bin:/usr/bin:/bin"


def _layer(path: pathlib.Path, entries: dict[str, tuple[str, int, int, str]]) -> pathlib.Path:
    """A layer tar from ``{path: (kind, mode, uid, link target)}``."""
    with tarfile.open(path, "w") as tar:
        for name, (kind, mode, uid, target) in sorted(entries.items()):
            info = tarfile.TarInfo("./" + name.lstrip("/"))
            info.mode, info.uid = mode, uid
            if kind == "directory":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, target
                tar.addfile(info)
            else:
                data = b"x"
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def _base_entries() -> dict[str, tuple[str, int, int, str]]:
    entries: dict[str, tuple[str, int, int, str]] = {
        "/bin": ("symlink", 0o777, 0, "usr/bin"),  # Debian's merged /usr
        "/usr": ("directory", 0o755, 0, ""),
        "/usr/bin": ("directory", 0o755, 0, ""),
        "/usr/bin/python3.11": ("file", 0o755, 0, ""),
        "/usr/bin/awk": ("symlink", 0o777, 0, "/etc/alternatives/awk"),
        "/etc/alternatives/awk": ("symlink", 0o777, 0, "/usr/bin/mawk"),
        "/usr/bin/mawk": ("file", 0o755, 0, ""),
        "/usr/share/novnc": ("directory", 0o755, 0, ""),
        f"{contract.NOVNC_WEB}/vnc_lite.html": ("file", 0o644, 0, ""),
    }
    for tool in ("sh", "date", "sleep", "mkdir"):
        entries[f"/usr/bin/{tool}"] = ("file", 0o755, 0, "")
    return entries


def _release_entries() -> dict[str, tuple[str, int, int, str]]:
    prefix = contract.OPENSTACK_PREFIX
    entries: dict[str, tuple[str, int, int, str]] = {
        f"{prefix}/bin": ("directory", 0o755, 0, ""),
        f"{prefix}/bin/python3.11": ("symlink", 0o777, 0, "/usr/bin/python3.11"),
        f"{prefix}/bin/python3": ("symlink", 0o777, 0, "python3.11"),
        contract.API_PASTE: ("file", 0o644, 0, ""),
        "/var/lib/nova": ("directory", 0o755, contract.UID, ""),
        "/var/log/nova": ("directory", 0o755, contract.UID, ""),
    }
    for binary in contract.BINARIES:
        if binary.name.startswith(prefix) or binary.name in ("uwsgi",) or binary.name.startswith("nova-"):
            path = binary.name if binary.name.startswith("/") else f"{prefix}/bin/{binary.name}"
            entries[path] = ("file", 0o755, 0, "")
    return entries


def _fs(
    tmp_path: pathlib.Path,
    base: dict[str, tuple[str, int, int, str]],
    release: dict[str, tuple[str, int, int, str]],
) -> dict[str, nova_image.Member]:
    layers = [_layer(tmp_path / "base.tar", base), _layer(tmp_path / "release.tar", release)]
    return nova_image.merged([nova_image.members(p) for p in layers])


def test_an_image_with_everything_the_contract_names_passes(tmp_path: pathlib.Path) -> None:
    assert nova_image.check(_fs(tmp_path, _base_entries(), _release_entries()), PATH_ENV) == []


@pytest.mark.parametrize(
    ("layer", "path", "reported"),
    [
        ("base", f"{contract.NOVNC_WEB}/vnc_lite.html", f"file {contract.NOVNC_WEB}/vnc_lite.html"),
        ("base", "/usr/bin/mawk", "binary awk"),  # the link chain through /etc/alternatives breaks
        ("base", "/usr/bin/python3.11", "binary python3"),  # the venv's python3 points at the base's
        ("release", contract.NOVA_AMQP_READY, f"binary {contract.NOVA_AMQP_READY}"),
        ("release", contract.API_PASTE, f"file {contract.API_PASTE}"),
    ],
)
def test_check_reports_what_a_layer_lacks(
    tmp_path: pathlib.Path, layer: str, path: str, reported: str
) -> None:
    base, release = _base_entries(), _release_entries()
    del (base if layer == "base" else release)[path]
    missing = nova_image.check(_fs(tmp_path, base, release), PATH_ENV)
    assert [m for m in missing if m.startswith(reported)], missing


def test_the_writable_directories_must_belong_to_the_contracts_uid(tmp_path: pathlib.Path) -> None:
    release = _release_entries()
    release["/var/log/nova"] = ("directory", 0o755, 0, "")
    assert nova_image.check(_fs(tmp_path, _base_entries(), release), PATH_ENV) == [
        f"directory /var/log/nova owned by {contract.UID}"
    ]


def test_a_program_off_path_is_missing(tmp_path: pathlib.Path) -> None:
    missing = nova_image.check(_fs(tmp_path, _base_entries(), _release_entries()), "/usr/bin:/bin")
    assert "binary nova-manage (db-sync, db-expand, db-contract, db-archive, discover-hosts)" in missing


def test_the_user_group_and_noVNC_paths_come_from_the_contract(tmp_path: pathlib.Path) -> None:
    passwd, group = nova_image.nova_user_lines()
    assert passwd.split(":")[2:4] == [str(contract.UID), str(contract.GID)]
    assert group.split(":")[2] == str(contract.GID)
    command = nova_image.mmdebstrap_command(tmp_path / "out.tar", tmp_path / "novnc_1.deb")
    hooks = [a for a in command if a.startswith("--customize-hook=")]
    assert any(f"./{contract.NOVNC_WEB.lstrip('/')}" in h for h in hooks)
    assert any(passwd in h and group in h for h in hooks)
    # noVNC's files only: the package (it would pull nodejs) is not installed
    assert "novnc" not in next(a for a in command if a.startswith("--include=")).split("=", 1)[1].split(",")
    assert nova_image.config(PATH_ENV)["config"] == {
        "Env": [f"PATH={PATH_ENV}"],
        "User": f"{contract.UID}:{contract.GID}",
        "WorkingDir": "/",
    }


def test_the_base_key_follows_its_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    before = nova_image.base_key()
    assert nova_image.base_key() == before
    monkeypatch.setattr(nova_image, "BASE_PACKAGES", (*nova_image.BASE_PACKAGES, "libyaml-0-2"))
    assert nova_image.base_key() != before
    monkeypatch.undo()
    monkeypatch.setattr(contract, "UID", contract.UID + 1)  # the user the base's /etc/passwd names
    assert nova_image.base_key() != before
    monkeypatch.undo()
    assert nova_image.base_key() == before


def test_the_layout_names_both_layers_by_digest(tmp_path: pathlib.Path) -> None:
    base = _layer(tmp_path / "base.tar", _base_entries())
    release = _layer(tmp_path / "release.tar", _release_entries())
    out = tmp_path / "layout.tar"
    nova_image.write_layout(out, "2025.2", [base, release], nova_image.config(PATH_ENV))
    with tarfile.open(out) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    for name, data in files.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
    index = json.loads(files["index.json"])
    (entry,) = index["manifests"]
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == "2025.2"
    manifest = json.loads(files[f"blobs/sha256/{entry['digest'].removeprefix('sha256:')}"])
    layers = [layer["digest"] for layer in manifest["layers"]]
    assert layers == [f"sha256:{hashlib.sha256(p.read_bytes()).hexdigest()}" for p in (base, release)]
    image_config = json.loads(files[f"blobs/sha256/{manifest['config']['digest'].removeprefix('sha256:')}"])
    assert image_config["rootfs"]["diff_ids"] == layers
    assert image_config["config"]["User"] == f"{contract.UID}:{contract.GID}"


def test_a_cold_base_without_mmdebstrap_says_what_installs_it(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nova_image.shutil, "which", lambda name: None)
    with pytest.raises(nova_image.NovaImageError, match=r"tools/realnova/install\.sh"):
        nova_image.base_layer(tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing half-made in the cache


def test_a_cached_base_is_reused_without_mmdebstrap(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = tmp_path / f"base-{nova_image.SUITE}-{nova_image.base_key()}.tar"
    cached.write_bytes(b"")
    monkeypatch.setattr(nova_image.shutil, "which", lambda name: None)
    assert nova_image.base_layer(tmp_path) == cached


def test_a_used_archive_is_kept_with_the_most_recently_used_of_its_kind_only(tmp_path: pathlib.Path) -> None:
    """Each change of an image's inputs leaves a new archive: the cache keeps the current one and
    the ``KEEP`` most recently used others of the same kind, and no archive of another kind."""
    ages = {f"nova-2026.1-{n}.tar": 100 * n for n in range(1, 6)}
    others = ["nova-2025.2-1.tar", f"base-{nova_image.SUITE}-1.tar", "nova-2026.1-x.partial"]
    for name in [*ages, *others]:
        (tmp_path / name).write_bytes(b"")
    for name, age in ages.items():
        os.utime(tmp_path / name, (age, age))
    current = tmp_path / "nova-2026.1-1.tar"  # the oldest, used again: it becomes the newest
    assert nova_image.used(current, "nova-2026.1-*.tar") == current
    kept = sorted(p.name for p in tmp_path.glob("nova-2026.1-*.tar"))
    assert kept == ["nova-2026.1-1.tar", "nova-2026.1-4.tar", "nova-2026.1-5.tar"]
    assert nova_image.KEEP == 2
    assert all((tmp_path / name).exists() for name in others)
    assert current.stat().st_mtime > 500


def test_a_cached_image_is_marked_used_and_prunes_its_older_ones(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / ".image").write_text("marker")
    monkeypatch.setattr(nova_image, "release_tree", lambda release: tree)
    monkeypatch.setattr(nova_image, "path_env", lambda tree: {"PATH": "/usr/bin"})
    cache = tmp_path / "cache"
    cache.mkdir()
    cached = cache / f"nova-2026.2-{nova_image.image_key(tree)}.tar"
    cached.write_bytes(b"")
    os.utime(cached, (1, 1))
    stale = [cache / f"nova-2026.2-old{n}.tar" for n in range(3)]
    for n, path in enumerate(stale):
        path.write_bytes(b"")
        os.utime(path, (10 + n, 10 + n))
    image = nova_image.build("2026.2", cache)
    assert image.tar == cached
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [cached.name, "nova-2026.2-old1.tar", "nova-2026.2-old2.tar"]
    )
