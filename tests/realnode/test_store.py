"""A store of images (``realnode.store``): made once by Debian's containerd, found again by what it
holds, and copied into a node as hard links except the files containerd writes in place.

No node here; ``tests/realnode/test_node.py`` runs a pod from a store's image on a real kubelet.
"""

from __future__ import annotations

import pathlib
import subprocess

import pytest
from realnode import busybox_image, images, store
from realnode.images import BUSYBOX_IMAGE
from realnode.store import MUTABLE, StoredImage, StoreError

pytestmark = pytest.mark.realnova

REPO = BUSYBOX_IMAGE.rpartition(":")[0]


@pytest.fixture(scope="module")
def busybox_tar() -> pathlib.Path:
    return images.build(busybox_image())


def _listed(root: pathlib.Path, tmp: pathlib.Path) -> set[str]:
    """The image names a containerd started on a copy of ``root`` lists."""
    copy = tmp / "listed" / "root"
    store.clone(root, copy)
    with store.containerd(copy, tmp / "listed" / "containerd.log") as ctr:
        done = subprocess.run([*ctr, "images", "ls", "-q"], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_a_store_holds_the_images_by_their_names_and_is_made_once(
    busybox_tar: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "stores"
    wanted = [StoredImage(busybox_tar, REPO, ("example.org/tools:7", "example.org/other:1"))]
    root = store.ensure(wanted, cache)
    assert _listed(root, tmp_path) == {BUSYBOX_IMAGE, "example.org/tools:7", "example.org/other:1"}
    # nothing of the store's containerd is left: no state, no socket, no build directory
    assert sorted(p.name for p in root.parent.iterdir()) == [
        "containerd.log",
        "done",
        "root",
    ]
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".")] == [root.parent.name]

    def made_again(*_: object) -> None:
        raise AssertionError("the cached store was made again")

    monkeypatch.setattr(store, "_make", made_again)
    assert store.ensure(wanted, cache) == root
    # another name is another store
    with pytest.raises(AssertionError, match="made again"):
        store.ensure([StoredImage(busybox_tar, REPO, ("example.org/tools:8",))], cache)


def test_a_clone_shares_the_files_but_not_the_databases(
    busybox_tar: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    root = store.ensure([StoredImage(busybox_tar, REPO)], tmp_path / "stores")
    dest = tmp_path / "node" / "root"
    store.clone(root, dest)
    blobs = sorted((root / "io.containerd.content.v1.content" / "blobs" / "sha256").iterdir())
    assert blobs
    for blob in blobs:
        assert (dest / blob.relative_to(root)).stat().st_ino == blob.stat().st_ino
    busybox = next((root / "io.containerd.snapshotter.v1.overlayfs" / "snapshots").glob("*/fs/bin/busybox"))
    assert (dest / busybox.relative_to(root)).stat().st_ino == busybox.stat().st_ino
    for relative in MUTABLE:
        assert (dest / relative).stat().st_ino != (root / relative).stat().st_ino, relative
        assert (dest / relative).read_bytes() == (root / relative).read_bytes(), relative
    # a node's root is made once: a second clone onto it is refused, not merged
    with pytest.raises(StoreError, match="exists"):
        store.clone(root, dest)


def test_a_broken_image_names_itself_and_leaves_no_store(tmp_path: pathlib.Path) -> None:
    broken = tmp_path / "broken.tar"
    broken.write_bytes(b"not a tar")
    cache = tmp_path / "stores"
    with pytest.raises(StoreError, match=r"import of broken\.tar"):
        store.ensure([StoredImage(broken, REPO)], cache)
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".")] == []
    # and no containerd of it left running
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert str(cache) not in ps


def test_only_the_most_recently_used_stores_are_kept(
    busybox_tar: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    cache = tmp_path / "stores"
    roots = [
        store.ensure([StoredImage(busybox_tar, REPO, (f"example.org/n:{n}",))], cache)
        for n in range(store.KEEP + 2)
    ]
    kept = {p.name for p in cache.iterdir() if (p / "done").exists()}
    # the last one made, and the KEEP used before it
    assert kept == {r.parent.name for r in roots[-(store.KEEP + 1) :]}
