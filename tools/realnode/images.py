"""OCI images for real nodes, written here without a registry or a container engine.

An image is a single uncompressed layer (a tar made from a mapping of paths to files) plus its
config, written as an OCI layout tar that ``ctr images import`` reads. The tars are reproducible
(fixed owners and times, sorted entries), so an image's digest depends on its content only, and each
is cached under ``CACHE`` by a digest of its inputs: a second build of the same image is a stat.

Uncompressed layers: the recipe measured gzip as the main cost of packing and importing (trap 11).

* ``pause_image(bindir)``: the sandbox image (``SANDBOX_IMAGE``) around the ``pause`` binary that
  ``tools/realnode/build.sh`` compiles from the Kubernetes module.
* ``busybox_image()``: Debian's static busybox with its applets, a ``/etc/passwd`` naming uid
  42424 and a ``/tmp``: enough for shell commands, probes and ``httpd``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
import shutil
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

CACHE = pathlib.Path(os.environ.get("REALNODE_IMAGE_CACHE", "/var/cache/nova-operator/realnode/images"))
SANDBOX_IMAGE = "registry.k8s.io/pause:3.10"
BUSYBOX_IMAGE = "realnode.local/busybox:1"
APP_UID = 42424
# Bump to rebuild every cached image after a change of how images are written.
FORMAT = "1"


@dataclass(frozen=True)
class Entry:
    """One path of a layer: a regular file (``data``), a directory, or a symlink (``target``)."""

    data: bytes | None = None
    mode: int = 0o755
    target: str | None = None
    directory: bool = False


def file(data: bytes, mode: int = 0o644) -> Entry:
    return Entry(data=data, mode=mode)


def directory(mode: int = 0o755) -> Entry:
    return Entry(mode=mode, directory=True)


def symlink(target: str) -> Entry:
    return Entry(target=target, mode=0o777)


@dataclass(frozen=True)
class ImageSpec:
    """What an image holds: its reference (``repo:tag``), its one layer and its config."""

    ref: str
    layer: Mapping[str, Entry]
    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    env: Sequence[str] = ("PATH=/bin",)
    user: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def repo(self) -> str:
        return self.ref.rsplit(":", 1)[0]

    @property
    def tag(self) -> str:
        return self.ref.rsplit(":", 1)[1]


def _layer_tar(entries: Mapping[str, Entry]) -> bytes:
    """A reproducible tar: parents first, owner root, mtime 0."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(entries):
            entry = entries[path]
            info = tarfile.TarInfo(path.lstrip("/"))
            info.mode, info.mtime, info.uid, info.gid = entry.mode, 0, 0, 0
            if entry.directory:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif entry.target is not None:
                info.type, info.linkname = tarfile.SYMTYPE, entry.target
                tar.addfile(info)
            else:
                data = entry.data or b""
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _blob(blobs: dict[str, bytes], data: bytes) -> dict[str, object]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"digest": digest, "size": len(data)}


def layout_tar(spec: ImageSpec) -> bytes:
    """The image as an OCI layout in a tar (``oci-layout``, ``index.json``, ``blobs/sha256/*``). The
    index names the manifest by the tag only: ``ctr images import --base-name <repo>`` adds the repo."""
    blobs: dict[str, bytes] = {}
    layer = _layer_tar(spec.layer)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            **({"Entrypoint": list(spec.entrypoint)} if spec.entrypoint else {}),
            **({"Cmd": list(spec.cmd)} if spec.cmd else {}),
            "Env": list(spec.env),
            **({"User": spec.user} if spec.user else {}),
            **({"Labels": dict(spec.labels)} if spec.labels else {}),
        },
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]},
        "history": [{"created_by": "realnode.images"}],
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            **_blob(blobs, json.dumps(config, sort_keys=True).encode()),
        },
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **_blob(blobs, layer)}],
    }
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                **_blob(blobs, json.dumps(manifest, sort_keys=True).encode()),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {"org.opencontainers.image.ref.name": spec.tag},
            }
        ],
    }
    entries: dict[str, Entry] = {
        "oci-layout": file(b'{"imageLayoutVersion":"1.0.0"}'),
        "index.json": file(json.dumps(index, sort_keys=True).encode()),
        "blobs": directory(),
        "blobs/sha256": directory(),
    }
    for digest, data in blobs.items():
        entries[f"blobs/sha256/{digest.removeprefix('sha256:')}"] = file(data)
    return _layer_tar(entries)


def _inputs_digest(spec: ImageSpec) -> str:
    h = hashlib.sha256(FORMAT.encode())
    h.update(
        json.dumps([spec.ref, list(spec.entrypoint), list(spec.cmd), list(spec.env), spec.user]).encode()
    )
    h.update(json.dumps(dict(spec.labels), sort_keys=True).encode())
    for path in sorted(spec.layer):
        e = spec.layer[path]
        h.update(json.dumps([path, e.mode, e.target, e.directory]).encode())
        h.update(hashlib.sha256(e.data or b"").digest())
    return h.hexdigest()[:16]


def build(spec: ImageSpec, cache: pathlib.Path = CACHE) -> pathlib.Path:
    """The image's OCI layout tar, from the cache when its inputs are unchanged."""
    name = spec.ref.replace("/", "_").replace(":", "_")
    out = cache / f"{name}-{_inputs_digest(spec)}.tar"
    if out.exists():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(f".partial{os.getpid()}")
    partial.write_bytes(layout_tar(spec))
    partial.rename(out)
    return out


def pause_image(bindir: pathlib.Path) -> ImageSpec:
    """The sandbox image: ``/pause`` as uid 65535, as the upstream image has it."""
    return ImageSpec(
        SANDBOX_IMAGE,
        {"pause": file((bindir / "pause").read_bytes(), 0o755)},
        entrypoint=["/pause"],
        env=[],
        user="65535:65535",
    )


def busybox_binary() -> pathlib.Path:
    """Debian's busybox-static (``tools/realnova/install.sh`` installs it); a dynamic one would not run
    in an image without a libc."""
    found = shutil.which("busybox")
    if found is None:
        raise FileNotFoundError("busybox is not installed (apt-get install busybox-static)")
    path = pathlib.Path(found).resolve()
    if b"/lib64/ld-linux" in path.read_bytes():  # a dynamic ELF names its loader (PT_INTERP)
        raise FileNotFoundError(f"{path} is not static (apt-get install busybox-static)")
    return path


def busybox_image(ref: str = BUSYBOX_IMAGE) -> ImageSpec:
    binary = busybox_binary()
    applets = subprocess.run(
        [str(binary), "--list"], check=True, capture_output=True, text=True
    ).stdout.split()
    layer: dict[str, Entry] = {
        "bin": directory(),
        "bin/busybox": file(binary.read_bytes(), 0o755),
        "etc": directory(),
        "etc/passwd": file(
            f"root:x:0:0:root:/root:/bin/sh\napp:x:{APP_UID}:{APP_UID}:app:/tmp:/bin/sh\n"
            "nobody:x:65534:65534:nobody:/:/bin/false\n".encode()
        ),
        "etc/group": file(f"root:x:0:\napp:x:{APP_UID}:\nnogroup:x:65534:\n".encode()),
        "tmp": directory(0o1777),
        "proc": directory(),
        "sys": directory(),
        "dev": directory(),
    }
    for applet in applets:
        if applet != "busybox":
            layer[f"bin/{applet}"] = symlink("busybox")
    return ImageSpec(ref, layer, cmd=["/bin/sh"], env=["PATH=/bin"])
