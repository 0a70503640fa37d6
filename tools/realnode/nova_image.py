"""The nova image of each supported release, for real nodes, built from the image contract.

    python -m realnode.nova_image              # every release of tools/catalogs/releases.txt
    python -m realnode.nova_image 2025.2       # one release; prints the layout tar and the timings

Two uncompressed layers, written as an OCI layout tar that ``ctr images import`` reads:

1. **The base** (shared by every release): Debian bookworm made by ``mmdebstrap --variant=essential``
   with ``BASE_PACKAGES`` (Debian's Python 3.11 and the shared libraries the venvs' compiled code
   links; ``mawk`` for the contract's ``awk``), without recommends, documentation, manual pages or
   locales. noVNC's web files (the contract's ``NOVNC_WEB``) come from the ``novnc`` package's files
   only (``dpkg-deb`` of the downloaded ``.deb``): installing the package would pull nodejs in. The
   contract's user and group (``UID``/``GID``, named nova) are added to ``/etc/passwd`` and
   ``/etc/group``.
2. **The release**: the relocated venv under the contract's ``OPENSTACK_PREFIX`` with
   ``nova-amqp-ready``, and ``/var/lib/nova``, ``/var/log/nova`` owned by the contract's uid, taken
   from the tree ``tools/realnova/images.py`` builds. Its ``python3.11`` links to
   ``/usr/bin/python3.11``: the base's.

The config runs as ``UID:GID`` with the tree's ``PATH`` (the venv's ``bin`` first). Before a layout
is written, every path and program the contract names is looked up in the two layers (``check``):
a missing one fails the build.

Cached by content under ``CACHE``: the base by a digest of its inputs (suite, mirrors, packages, the
contract's user), each image by the base's key and the release tree's marker (which covers the venv,
the contract and the probe script). A second build is a stat. Cold: mmdebstrap downloads and
installs about 100 packages (minutes); a release's layout is a copy of the tree into a tar (seconds).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nova_operator import image_contract as contract
from realnode.images import CACHE as IMAGE_CACHE

REPO = pathlib.Path(__file__).resolve().parents[2]
REALNOVA_IMAGES = REPO / "tools" / "realnova" / "images.py"
RELEASES = REPO / "tools" / "catalogs" / "releases.txt"
CACHE = IMAGE_CACHE / "nova"
NOVA_REPO = "realnode.local/nova"
# Bump to rebuild every cached base and image after a change of how they are made.
FORMAT = "1"

SUITE = "bookworm"
MIRRORS = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
#: What the base adds to Debian's essential packages (which bring the shell, coreutils' date, sleep
#: and mkdir the contract names): the interpreter the venvs were built with and what their compiled
#: code links (``readelf -d``: libpython3.11, libxml2, libssl3, zlib, libstdc++, libgcc, libuuid),
#: and ``mawk`` for ``awk``.
BASE_PACKAGES = (
    "python3",
    "python3.11",
    "libpython3.11",
    "libxml2",
    "libssl3",
    "zlib1g",
    "libstdc++6",
    "libgcc-s1",
    "libuuid1",
    "mawk",
)
#: Debian's merged /usr made by mmdebstrap's hooks, with ``usr-is-merged``: else apt satisfies
#: init-system-helpers with ``usrmerge``, which pulls in perl (45 MB).
HOOK_DIRS = ("/usr/share/mmdebstrap/hooks/merged-usr",)
NOVNC_PACKAGE = "novnc"
EXCLUDED = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")
KEPT = ("/usr/share/doc/*/copyright",)
RELEASE_PATHS = (contract.OPENSTACK_PREFIX, "/var/lib/nova", "/var/log/nova")


class NovaImageError(RuntimeError):
    pass


@dataclass(frozen=True)
class NovaImage:
    """An image's reference and its OCI layout tar (``ctr images import --base-name NOVA_REPO``)."""

    release: str
    tar: pathlib.Path

    @property
    def ref(self) -> str:
        return f"{NOVA_REPO}:{self.release}"


@dataclass
class Timings:
    """Seconds spent per step of the last builds (0 when the cache had it)."""

    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, step: str, t0: float) -> None:
        self.seconds[step] = round(time.monotonic() - t0, 1)


def releases() -> list[str]:
    return [
        line.split()[0]
        for line in RELEASES.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


def nova_user_lines() -> tuple[str, str]:
    """The contract's user and group as ``/etc/passwd`` and ``/etc/group`` lines."""
    return (
        f"nova:x:{contract.UID}:{contract.GID}:nova:/var/lib/nova:/usr/sbin/nologin",
        f"nova:x:{contract.GID}:",
    )


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps([FORMAT, *parts], sort_keys=True).encode()).hexdigest()[:16]


def base_key() -> str:
    return _digest(SUITE, MIRRORS, BASE_PACKAGES, HOOK_DIRS, NOVNC_PACKAGE, EXCLUDED, KEPT, nova_user_lines())


def mmdebstrap_command(out: pathlib.Path, novnc_deb: pathlib.Path) -> list[str]:
    passwd, group = nova_user_lines()
    web = contract.NOVNC_WEB.lstrip("/")
    return [
        "mmdebstrap",
        "--variant=essential",
        "--aptopt=APT::Install-Recommends false",
        f"--include={','.join(BASE_PACKAGES)}",
        *[f"--hook-dir={d}" for d in HOOK_DIRS],
        *[f"--dpkgopt=path-exclude={p}" for p in EXCLUDED],
        *[f"--dpkgopt=path-include={p}" for p in KEPT],
        # noVNC's files only: the package itself depends on nodejs (through websockify)
        "--customize-hook="
        f'dpkg-deb --fsys-tarfile {shlex.quote(str(novnc_deb))} | tar -C "$1" -x ./{web} '
        f"./usr/share/doc/{NOVNC_PACKAGE}/copyright",
        f'--customize-hook=echo {shlex.quote(passwd)} >>"$1/etc/passwd"; '
        f'echo {shlex.quote(group)} >>"$1/etc/group"',
        '--customize-hook=rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/apt '
        '"$1"/var/log/*.log',
        SUITE,
        str(out),
        *MIRRORS,
    ]


KEEP = 2
"""Archives of each kind kept besides the current one: each change of an image's inputs (the
contract, a venv, this builder) leaves a new one, half a gigabyte for a release's image."""


def used(current: pathlib.Path, pattern: str) -> pathlib.Path:
    """``current`` marked as just used, and the archives in its directory that match ``pattern``
    (the same kind: one release's images, or the bases) pruned to the ``KEEP`` most recently used
    besides it."""
    os.utime(current)
    older = sorted(
        (p for p in current.parent.glob(pattern) if p != current),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for stale in older[KEEP:]:
        stale.unlink(missing_ok=True)
    return current


def base_layer(cache: pathlib.Path = CACHE, timings: Timings | None = None) -> pathlib.Path:
    """The base layer's tar (reproducible: mmdebstrap's tar with SOURCE_DATE_EPOCH=0)."""
    out = cache / f"base-{SUITE}-{base_key()}.tar"
    if out.exists():
        return used(out, f"base-{SUITE}-*.tar")
    if shutil.which("mmdebstrap") is None:
        raise NovaImageError("mmdebstrap is not installed: run tools/realnova/install.sh")
    t0 = time.monotonic()
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".base-") as tmp:
        work = pathlib.Path(tmp)
        subprocess.run(["apt-get", "download", NOVNC_PACKAGE], cwd=work, check=True, capture_output=True)
        (deb,) = work.glob(f"{NOVNC_PACKAGE}_*.deb")
        partial = work / "base.tar"
        log = work / "mmdebstrap.log"
        with log.open("wb") as sink:
            # root mode mounts /proc, /dev ... into the target: in a mount namespace of its own
            done = subprocess.run(
                [
                    "unshare",
                    "-m",
                    "--propagation",
                    "private",
                    "--",
                    "nice",
                    "-n",
                    "10",
                    *mmdebstrap_command(partial, deb),
                ],
                env={**os.environ, "SOURCE_DATE_EPOCH": "0"},
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        if done.returncode != 0:
            raise NovaImageError(f"mmdebstrap failed:\n{log.read_text()[-3000:]}")
        partial.rename(out)
    if timings is not None:
        timings.add("base", t0)
    return used(out, f"base-{SUITE}-*.tar")


def release_tree(release: str) -> pathlib.Path:
    """The directory of the release's image tree (``tools/realnova/images.py`` builds or reuses it):
    ``root`` (the tree), ``.image`` (its marker) and ``env.json`` (its PATH)."""
    out = subprocess.run(
        [sys.executable, str(REALNOVA_IMAGES), release], check=True, capture_output=True, text=True
    )
    return pathlib.Path(out.stdout.split()[-1])


def _release_layer(root: pathlib.Path, out: pathlib.Path) -> None:
    """The release's paths of ``root`` as a reproducible tar (owners and modes as in the tree)."""
    subprocess.run(
        [
            "tar",
            "--create",
            f"--file={out}",
            "--format=posix",
            "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
            "--sort=name",
            "--mtime=@0",
            "--numeric-owner",
            f"--directory={root}",
            *[p.lstrip("/") for p in RELEASE_PATHS],
        ],
        check=True,
    )


# -- what the layers hold --------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    kind: str  # "file", "directory", "symlink", "other"
    mode: int
    uid: int
    target: str = ""


def members(layer: pathlib.Path) -> dict[str, Member]:
    """The paths of a layer tar, absolute, with what each is."""
    found: dict[str, Member] = {}
    with tarfile.open(layer) as tar:
        for m in tar:
            name = "/" + m.name.removeprefix("./").rstrip("/")
            if m.isdir():
                kind = "directory"
            elif m.issym():
                kind = "symlink"
            elif m.isfile() or m.islnk():
                kind = "file"
            else:
                kind = "other"
            found["/" if name == "/" else name] = Member(kind, m.mode, m.uid, m.linkname if m.issym() else "")
    return found


def merged(layers: Sequence[Mapping[str, Member]]) -> dict[str, Member]:
    """The image's file system: later layers replace earlier paths (no whiteouts are written here)."""
    out: dict[str, Member] = {}
    for layer in layers:
        out.update(layer)
    return out


def lookup(fs: Mapping[str, Member], path: str) -> Member | None:
    """What ``path`` is in the image, symbolic links followed (in any component)."""
    parts = [p for p in path.split("/") if p]
    current = ""
    for _ in range(64):
        if not parts:
            return fs.get(current or "/")
        current = f"{current}/{parts.pop(0)}"
        member = fs.get(current)
        if member is None:
            if not parts:
                return None
            continue  # a parent a layer leaves implicit (an unpacker makes it a directory)
        if member.kind == "symlink":
            target = member.target
            base = "" if target.startswith("/") else current.rsplit("/", 1)[0]
            parts = [p for p in f"{base}/{target}".split("/") if p] + parts
            resolved: list[str] = []
            for p in parts:
                if p == "..":
                    if resolved:
                        resolved.pop()
                elif p != ".":
                    resolved.append(p)
            parts, current = resolved, ""
    return None


def check(fs: Mapping[str, Member], path_env: str) -> list[str]:
    """What the contract names and the image lacks (paths, programs on ``path_env`` or absolute, the
    nova user)."""
    missing = []
    for entry in contract.PATHS:
        found = lookup(fs, entry.path)
        if found is None or found.kind != entry.kind:
            missing.append(f"{entry.kind} {entry.path} ({entry.used_by})")
    dirs = path_env.split(":")
    for binary in contract.BINARIES:
        candidates = [binary.name] if binary.name.startswith("/") else [f"{d}/{binary.name}" for d in dirs]
        if not any(
            (m := lookup(fs, c)) is not None and m.kind == "file" and m.mode & 0o111 for c in candidates
        ):
            missing.append(f"binary {binary.name} ({binary.used_by})")
    web_page = lookup(fs, f"{contract.NOVNC_WEB}/vnc_lite.html")
    if web_page is None or web_page.kind != "file":
        missing.append(f"file {contract.NOVNC_WEB}/vnc_lite.html (novncproxy's readiness probe)")
    for writable in ("/var/lib/nova", "/var/log/nova"):
        owner = fs.get(writable)
        if owner is None or owner.uid != contract.UID:
            missing.append(f"directory {writable} owned by {contract.UID}")
    return missing


def passwd_has_nova(base: pathlib.Path) -> bool:
    with tarfile.open(base) as tar:
        passwd = tar.extractfile("./etc/passwd")
        return passwd is not None and nova_user_lines()[0] in passwd.read().decode().splitlines()


# -- the OCI layout ------------------------------------------------------------------------------


def _sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def config(path_env: str) -> dict[str, object]:
    """The image's config without its ``rootfs`` (``write_layout`` adds the layers' digests)."""
    return {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": [f"PATH={path_env}"], "User": f"{contract.UID}:{contract.GID}", "WorkingDir": "/"},
        "history": [
            {"created_by": "realnode.nova_image base"},
            {"created_by": "realnode.nova_image release"},
        ],
    }


def write_layout(
    out: pathlib.Path, tag: str, layers: Sequence[pathlib.Path], image_config: Mapping[str, object]
) -> None:
    """An OCI layout tar naming its manifest by ``tag``, with ``layers`` (uncompressed tars, streamed)."""
    digests = [_sha256(p) for p in layers]
    config_blob = json.dumps(
        {**image_config, "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in digests]}},
        sort_keys=True,
    ).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": "sha256:" + hashlib.sha256(config_blob).hexdigest(),
            "size": len(config_blob),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": f"sha256:{d}",
                "size": p.stat().st_size,
            }
            for d, p in zip(digests, layers, strict=True)
        ],
    }
    manifest_blob = json.dumps(manifest, sort_keys=True).encode()
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": "sha256:" + hashlib.sha256(manifest_blob).hexdigest(),
                "size": len(manifest_blob),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {"org.opencontainers.image.ref.name": tag},
            }
        ],
    }

    def small(tar: tarfile.TarFile, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))

    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        small(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        small(tar, "index.json", json.dumps(index, sort_keys=True).encode())
        for name in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        small(tar, f"blobs/sha256/{hashlib.sha256(config_blob).hexdigest()}", config_blob)
        small(tar, f"blobs/sha256/{hashlib.sha256(manifest_blob).hexdigest()}", manifest_blob)
        for digest, layer in zip(digests, layers, strict=True):
            info = tarfile.TarInfo(f"blobs/sha256/{digest}")
            info.size, info.mode = layer.stat().st_size, 0o644
            with layer.open("rb") as f:
                tar.addfile(info, f)


def path_env(tree: pathlib.Path) -> str:
    """The PATH ``tools/realnova/images.py`` wrote beside the tree (the venv's ``bin`` first)."""
    env: dict[str, str] = json.loads((tree / "env.json").read_text())
    return env["PATH"]


def image_key(tree: pathlib.Path) -> str:
    return _digest(base_key(), (tree / ".image").read_text(), RELEASE_PATHS, path_env(tree))


def build(release: str, cache: pathlib.Path = CACHE, timings: Timings | None = None) -> NovaImage:
    """The release's image (built, or from the cache)."""
    timings = timings if timings is not None else Timings()
    t0 = time.monotonic()
    tree = release_tree(release)
    timings.add(f"{release} tree", t0)
    out = cache / f"nova-{release}-{image_key(tree)}.tar"
    if out.exists():
        return NovaImage(release, used(out, f"nova-{release}-*.tar"))
    base = base_layer(cache, timings)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(dir=cache, prefix=f".{release}-") as tmp:
        layer = pathlib.Path(tmp) / "release.tar"
        _release_layer(tree / "root", layer)
        timings.add(f"{release} layer", t0)
        env = path_env(tree)
        t0 = time.monotonic()
        missing = check(merged([members(base), members(layer)]), env)
        if not passwd_has_nova(base):
            missing.append(f"the nova user ({contract.UID}) in /etc/passwd")
        timings.add(f"{release} check", t0)
        if missing:
            raise NovaImageError(
                f"the {release} image lacks what the image contract names: " + "; ".join(missing)
            )
        t0 = time.monotonic()
        partial = pathlib.Path(tmp) / "layout.tar"
        write_layout(partial, release, [base, layer], config(env))
        partial.rename(out)
        timings.add(f"{release} pack", t0)
    return NovaImage(release, used(out, f"nova-{release}-*.tar"))


def import_command(image: NovaImage, *flags: str) -> list[str]:
    """The arguments after ``ctr`` (``Node.ctr``) that import the image (``flags`` such as
    ``--no-unpack`` go before the file: ``ctr`` reads no flag after it)."""
    return ["images", "import", *flags, "--base-name", NOVA_REPO, str(image.tar)]


def main(argv: list[str]) -> int:
    wanted = argv or releases()
    timings = Timings()
    for release in wanted:
        image = build(release, timings=timings)
        print(f"{image.ref} {image.tar} {image.tar.stat().st_size // 2**20} MiB")
    print(json.dumps(timings.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
