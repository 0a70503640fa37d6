"""A containerd root that already holds a set of images, made once per set and cached; every node
starts from a hard-linked copy of it instead of importing the images itself.

Importing a nova image unpacks about 500 MiB of files. Done into every node (five nodes, every
supported release), it was most of a real-node cluster's start: 110 to 290 s under load, and 11 to
15 GB of disk per session. A store is unpacked once, by a containerd of its own, and kept under
``CACHE`` by a digest of what it holds (each image's layout tar, the names it is tagged with, and
containerd's version). A node's copy (``clone``) is ``cp -al``: new directories, the files shared
with the store. That is safe because nothing writes a file of a store in place:

* content blobs are immutable (an ingest writes a new file);
* an unpacked layer's snapshot is only ever a read-only ``lowerdir`` of an overlay: a container
  writes to its own new upper directory, and overlayfs copies a file up before changing it;
* the two bolt databases (containerd's metadata and the overlayfs snapshotter's) are written in
  place, so each node gets a copy of its own (``MUTABLE``).

The store's containerd runs in a private mount namespace (its overlay mounts while unpacking stay
there), without the CRI plugin, and with its state, sockets and ``opt`` under the store's build
directory. The images are in the ``k8s.io`` namespace, where the node's CRI plugin finds them at
start as it would after ``ctr images import``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from realnode.images import CACHE as IMAGE_CACHE

CACHE = IMAGE_CACHE / "stores"
NAMESPACE = "k8s.io"
#: the files of a containerd root that containerd writes in place (bolt databases): copied per node
MUTABLE = ("io.containerd.metadata.v1.bolt/meta.db", "io.containerd.snapshotter.v1.overlayfs/metadata.db")
#: stores kept besides the one just made or used (by last use); older ones are removed
KEEP = 3
# Bump to rebuild every store after a change of how one is made.
FORMAT = "1"


class StoreError(RuntimeError):
    """A store's containerd failed, or an image did not import."""


@dataclass(frozen=True)
class StoredImage:
    """An OCI layout tar, imported as ``base_name`` (its index names the tag), then tagged ``names``."""

    tar: pathlib.Path
    base_name: str
    names: tuple[str, ...] = ()


def _containerd_version() -> str:
    done = subprocess.run(["containerd", "--version"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def key(images: Sequence[StoredImage], version: str) -> str:
    """What a store holds, as a digest: each tar's name and size (its name carries a digest of its
    inputs, ``realnode.images.build`` and ``realnode.nova_image``), its base name and tags, in order."""
    described = [[i.tar.name, i.tar.stat().st_size, i.base_name, list(i.names)] for i in images]
    return hashlib.sha256(json.dumps([FORMAT, version, described]).encode()).hexdigest()[:16]


def config(root: pathlib.Path, state: pathlib.Path) -> str:
    """containerd's config for a store's ``root``: its state, socket and ``opt`` in ``state`` (a short
    path: a unix socket's address has 108 bytes), no CRI (no sandboxes, no network), no metrics."""
    return f"""version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "{state / "c.sock"}"
[ttrpc]
  address = "{state / "c.sock.ttrpc"}"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{state / "opt"}"
"""


@contextlib.contextmanager
def containerd(root: pathlib.Path, log: pathlib.Path) -> Iterator[list[str]]:
    """A containerd without CRI on ``root``, in a private mount namespace (its overlay mounts while it
    unpacks stay there), until the block ends; yields the ``ctr`` command that reaches it."""
    with tempfile.TemporaryDirectory(prefix="rn-store-") as state_dir:
        state = pathlib.Path(state_dir)
        (state / "containerd.toml").write_text(config(root, state))
        with log.open("wb") as out:
            private = ["unshare", "--mount", "--propagation", "private"]
            daemon = subprocess.Popen(
                [*private, "containerd", "--config", str(state / "containerd.toml")],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            ctr = ["ctr", "--address", str(state / "c.sock"), "-n", NAMESPACE]
            try:
                deadline = time.monotonic() + 60
                while subprocess.run([*ctr, "version"], capture_output=True).returncode != 0:
                    if daemon.poll() is not None or time.monotonic() > deadline:
                        tail = log.read_text()[-2000:]
                        raise StoreError(f"the store's containerd did not start: {tail}")
                    time.sleep(0.2)
                yield ctr
            finally:
                daemon.terminate()
                try:
                    daemon.wait(30)
                except subprocess.TimeoutExpired:
                    daemon.kill()
                    daemon.wait()


@contextlib.contextmanager
def _locked(path: pathlib.Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _make(images: Sequence[StoredImage], build: pathlib.Path) -> None:
    if build.exists():
        shutil.rmtree(build)
    build.mkdir(parents=True)
    with containerd(build / "root", build / "containerd.log") as ctr:
        for image in images:
            done = subprocess.run(
                [*ctr, "images", "import", "--base-name", image.base_name, str(image.tar)],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise StoreError(f"import of {image.tar.name}: {done.stderr.strip()}")
            ref = _imported_ref(done.stdout)
            for name in image.names:
                tag = [*ctr, "images", "tag", "--force", ref, name]
                tagged = subprocess.run(tag, capture_output=True, text=True)
                if tagged.returncode != 0:
                    raise StoreError(f"tag {name}: {tagged.stderr.strip()}")


def _imported_ref(out: str) -> str:
    """The reference ``ctr images import`` printed: ``unpacking <ref> (sha256:...)...done``."""
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "unpacking":
            return words[1]
    raise StoreError(f"ctr images import named no image: {out.strip()!r}")


def _prune(cache: pathlib.Path, current: pathlib.Path) -> None:
    """Keep the ``KEEP`` most recently used stores besides ``current``. A node's copy does not need
    its store: its hard links keep the files."""
    stores = [p for p in cache.iterdir() if p.is_dir() and (p / "done").exists() and p != current]
    stores.sort(key=lambda p: (p / "done").stat().st_mtime, reverse=True)
    for old in stores[KEEP:]:
        with _locked(cache / f".{old.name}.lock"):
            shutil.rmtree(old, ignore_errors=True)


def ensure(images: Sequence[StoredImage], cache: pathlib.Path = CACHE) -> pathlib.Path:
    """The root of a store holding ``images``, made unless the cache has it; returns its ``root``."""
    store = cache / key(images, _containerd_version())
    with _locked(cache / f".{store.name}.lock"):
        if not (store / "done").exists():
            build = store.with_name(f"{store.name}.partial{os.getpid()}")
            try:
                _make(images, build)
            except BaseException:
                shutil.rmtree(build, ignore_errors=True)
                raise
            if store.exists():
                shutil.rmtree(store)
            build.rename(store)
            (store / "done").write_text(
                json.dumps([[str(i.tar), i.base_name, list(i.names)] for i in images])
            )
        os.utime(store / "done")  # its last use, for _prune
    _prune(cache, store)
    return store / "root"


def clone(root: pathlib.Path, dest: pathlib.Path) -> None:
    """A node's containerd root at ``dest`` (absent) from the store's ``root``: hard links, but its own
    copy of each file containerd writes in place."""
    if dest.exists():
        raise StoreError(f"{dest} exists: a node's root is cloned once, before its containerd starts")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _locked(root.parent.parent / f".{root.parent.name}.lock"):
        subprocess.run(["cp", "-al", str(root), str(dest)], check=True, capture_output=True)
    for relative in MUTABLE:
        target = dest / relative
        if target.exists():
            target.unlink()
            shutil.copy2(root / relative, target)
