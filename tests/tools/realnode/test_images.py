"""The OCI layouts ``realnode.images`` writes for ``ctr images import``: reproducible, and consistent
(every digest names its blob, the config's diff_id is the layer's)."""

from __future__ import annotations

import hashlib
import io
import json
import pathlib
import tarfile

from realnode import images


def _spec() -> images.ImageSpec:
    return images.ImageSpec(
        "example.local/tiny:1",
        {
            "bin": images.directory(),
            "bin/tool": images.file(b"#!/bin/sh\necho hi\n", 0o755),
            "bin/alias": images.symlink("tool"),
            "tmp": images.directory(0o1777),
        },
        cmd=["/bin/tool"],
        user="42424:42424",
    )


def _members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else b"") for m in tar}  # type: ignore[union-attr]


def test_the_same_inputs_give_the_same_bytes() -> None:
    assert images.layout_tar(_spec()) == images.layout_tar(_spec())


def test_the_layout_names_its_manifest_by_tag_and_every_digest_its_blob() -> None:
    files = _members(images.layout_tar(_spec()))
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    for name, data in files.items():
        if name.startswith("blobs/sha256/") and data:
            assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"] == {"org.opencontainers.image.ref.name": "1"}
    assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
    manifest = json.loads(files["blobs/sha256/" + entry["digest"].removeprefix("sha256:")])
    config = json.loads(files["blobs/sha256/" + manifest["config"]["digest"].removeprefix("sha256:")])
    (layer,) = manifest["layers"]
    assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar"
    assert config["rootfs"]["diff_ids"] == [layer["digest"]]  # uncompressed: the same digest
    assert config["config"]["User"] == "42424:42424"
    assert config["config"]["Cmd"] == ["/bin/tool"]
    blob = files["blobs/sha256/" + layer["digest"].removeprefix("sha256:")]
    with tarfile.open(fileobj=io.BytesIO(blob)) as rootfs:
        members = {m.name: m for m in rootfs}
    assert members["bin/tool"].mode == 0o755
    assert members["bin/alias"].issym()
    assert members["bin/alias"].linkname == "tool"
    assert members["tmp"].mode == 0o1777
    assert {m.mtime for m in members.values()} == {0}


def test_build_reuses_the_cached_tar_and_a_change_makes_a_new_one(tmp_path: pathlib.Path) -> None:
    first = images.build(_spec(), tmp_path)
    assert images.build(_spec(), tmp_path) == first
    changed = images.ImageSpec(_spec().ref, {**_spec().layer, "etc": images.directory()})
    assert images.build(changed, tmp_path) != first
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [first.name, images.build(changed, tmp_path).name]
    )
