"""The kubelet stand-in's volume contents and the atomic ``..data`` swap."""

from __future__ import annotations

import base64
import os
import pathlib
from typing import Any

import pytest
from simcluster.realtier.kubelet import volumes
from simcluster.realtier.kubelet.volumes import File

JSON = dict[str, Any]


class Objects:
    def __init__(self, configmaps: dict[str, JSON], secrets: dict[str, JSON]) -> None:
        self.cms, self.secrets = configmaps, secrets

    def configmap(self, name: str) -> JSON | None:
        return self.cms.get(name)

    def secret(self, name: str) -> JSON | None:
        return self.secrets.get(name)


OBJECTS = Objects(
    {
        "cm": {
            "data": {"a.conf": "A", "b.conf": "B"},
            "binaryData": {"bin": base64.b64encode(b"\x00\x01").decode()},
        }
    },
    {"s": {"kind": "Secret", "type": "Opaque", "data": {"pw": base64.b64encode(b"secret").decode()}}},
)
POD = {
    "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}},
    "spec": {"containers": [{"name": "c"}]},
}


def test_configmap_all_keys_with_default_mode() -> None:
    files = volumes.project({"configMap": {"name": "cm", "defaultMode": 0o600}}, POD, OBJECTS, {})
    assert files == {
        "a.conf": File(b"A", 0o600),
        "b.conf": File(b"B", 0o600),
        "bin": File(b"\x00\x01", 0o600),
    }


def test_secret_items_with_paths_and_modes() -> None:
    vol = {"secret": {"secretName": "s", "items": [{"key": "pw", "path": "dir/password", "mode": 0o400}]}}
    assert volumes.project(vol, POD, OBJECTS, {}) == {"dir/password": File(b"secret", 0o400)}


def test_missing_sources() -> None:
    with pytest.raises(volumes.MountError, match='secret "gone" not found'):
        volumes.project({"secret": {"secretName": "gone"}}, POD, OBJECTS, {})
    with pytest.raises(volumes.MountError, match="non-existent config key: nokey"):
        volumes.project(
            {"configMap": {"name": "cm", "items": [{"key": "nokey", "path": "x"}]}}, POD, OBJECTS, {}
        )
    assert volumes.project({"configMap": {"name": "gone", "optional": True}}, POD, OBJECTS, {}) == {}


def test_projected_and_downward_api() -> None:
    vol = {
        "projected": {
            "defaultMode": 0o440,
            "sources": [
                {"configMap": {"name": "cm", "items": [{"key": "a.conf", "path": "a"}]}},
                {"secret": {"name": "s"}},
                {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
            ],
        }
    }
    assert volumes.project(vol, POD, OBJECTS, {}) == {
        "a": File(b"A", 0o440),
        "pw": File(b"secret", 0o440),
        "name": File(b"p", 0o440),
    }
    labels = volumes.project(
        {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
        POD,
        OBJECTS,
        {},
    )
    assert labels == {"labels": File(b'app="x"', 0o644)}
    assert volumes.project({"emptyDir": {}}, POD, OBJECTS, {}) is None


def test_atomic_writer_swaps_data_and_prunes(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "vol"
    assert volumes.write_atomic(target, {"a": File(b"1", 0o644), "sub/b": File(b"2", 0o600)})
    first = os.readlink(target / "..data")
    assert (target / "a").read_bytes() == b"1"
    assert os.readlink(target / "a") == "..data/a"
    assert (target / "sub" / "b").read_bytes() == b"2"
    assert (target / "sub" / "b").stat().st_mode & 0o777 == 0o600
    # the same payload: nothing written
    assert not volumes.write_atomic(target, {"a": File(b"1", 0o644), "sub/b": File(b"2", 0o600)})
    assert os.readlink(target / "..data") == first
    # a new payload: a new directory, the old one and the stale names gone
    assert volumes.write_atomic(target, {"a": File(b"changed", 0o644)})
    assert os.readlink(target / "..data") != first
    assert not (target / first).exists()
    assert not (target / "sub").exists()
    assert (target / "a").read_bytes() == b"changed"
    assert sorted(p.name for p in target.iterdir() if not p.name.startswith("..")) == ["a"]


def test_fs_group_gets_read_access(tmp_path: pathlib.Path) -> None:
    volumes.write_atomic(tmp_path / "v", {"k": File(b"x", 0o400)}, fs_group=4242)
    st = (tmp_path / "v" / "k").stat()
    assert (st.st_gid, st.st_mode & 0o777) == (4242, 0o440)
