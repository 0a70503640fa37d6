"""Volume contents from the API (pure), the kubelet's atomic ``..data`` writer, and local volumes.

``project(volume, pod, objects, allocatable)`` gives the files of a ConfigMap, Secret, projected or
downwardAPI volume as ``{relative path: File}`` (``None`` for other volume types); a missing
ConfigMap/Secret or key that is not ``optional`` raises ``MountError`` (the pod stays
``ContainerCreating``, as with a kubelet). ``write_atomic(dir, files)`` lays the files out as the
kubelet's AtomicWriter does: the payload in a ``..<timestamp>`` directory, ``..data`` a symlink to it
swapped by ``rename(2)``, and each top-level name a symlink into ``..data``; so a reader sees the old
or the new payload, never a mix. ``prepare_local`` makes or checks the volumes kept on the node's disk
(``emptyDir``, ``hostPath`` under the node's own root).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simcluster.realtier.kubelet import envvars

JSON = dict[str, Any]
DEFAULT_MODE = 0o644
DATA = "..data"


class MountError(Exception):
    """A volume's source is missing (the pod waits in ``ContainerCreating``)."""


@dataclass(frozen=True)
class File:
    data: bytes
    mode: int


def _keyed(
    kind: str,
    ref: JSON,
    objects: envvars.Objects,
    default_mode: int,
) -> dict[str, File]:
    name = ref.get("name") or ref.get("secretName", "")
    obj = objects.configmap(name) if kind == "ConfigMap" else objects.secret(name)
    if obj is None:
        if ref.get("optional"):
            return {}
        raise MountError(f'{"configmap" if kind == "ConfigMap" else "secret"} "{name}" not found')
    data = envvars.config_data(obj)
    items = ref.get("items")
    if not items:
        return {key: File(value, default_mode) for key, value in data.items()}
    out: dict[str, File] = {}
    for item in items:
        if item["key"] not in data:
            if ref.get("optional"):
                continue
            what = "configmap" if kind == "ConfigMap" else "secret"
            raise MountError(f"{what} references non-existent {what.replace('map', '')} key: {item['key']}")
        out[item["path"]] = File(data[item["key"]], item.get("mode", default_mode))
    return out


def _downward(
    items: list[JSON], pod: JSON, allocatable: Mapping[str, str], default_mode: int
) -> dict[str, File]:
    out: dict[str, File] = {}
    for item in items:
        if "fieldRef" in item:
            try:
                value = envvars.field_value(pod, item["fieldRef"]["fieldPath"])
            except envvars.ConfigError as exc:
                raise MountError(str(exc)) from None
        else:
            value = envvars.resource_value(pod, None, item["resourceFieldRef"], allocatable)
        out[item["path"]] = File(value.encode(), item.get("mode", default_mode))
    return out


def project(
    volume: JSON, pod: JSON, objects: envvars.Objects, allocatable: Mapping[str, str]
) -> dict[str, File] | None:
    """The files of an API-backed volume, or ``None`` for another type (emptyDir, hostPath, ...)."""
    if "configMap" in volume:
        ref = volume["configMap"]
        return _keyed("ConfigMap", ref, objects, ref.get("defaultMode", DEFAULT_MODE))
    if "secret" in volume:
        ref = volume["secret"]
        return _keyed("Secret", ref, objects, ref.get("defaultMode", DEFAULT_MODE))
    if "downwardAPI" in volume:
        ref = volume["downwardAPI"]
        return _downward(ref.get("items") or [], pod, allocatable, ref.get("defaultMode", DEFAULT_MODE))
    if "projected" in volume:
        ref = volume["projected"]
        mode = ref.get("defaultMode", DEFAULT_MODE)
        out: dict[str, File] = {}
        for source in ref.get("sources") or []:
            if "configMap" in source:
                out.update(_keyed("ConfigMap", source["configMap"], objects, mode))
            elif "secret" in source:
                out.update(_keyed("Secret", source["secret"], objects, mode))
            elif "downwardAPI" in source:
                out.update(_downward(source["downwardAPI"].get("items") or [], pod, allocatable, mode))
            elif "serviceAccountToken" in source:
                raise MountError("serviceAccountToken projections are not supported by the stand-in")
        return out
    return None


def _current(target: pathlib.Path) -> dict[str, File] | None:
    data = target / DATA
    if not data.is_symlink():
        return None
    root = target / os.readlink(data)
    out: dict[str, File] = {}
    for path in root.rglob("*"):
        if path.is_file():
            out[str(path.relative_to(root))] = File(path.read_bytes(), path.stat().st_mode & 0o7777)
    return out


def write_atomic(target: pathlib.Path, files: Mapping[str, File], fs_group: int | None = None) -> bool:
    """Make ``target`` hold exactly ``files`` by the ``..data`` swap; False when it already did."""
    target.mkdir(parents=True, exist_ok=True)
    want = {path: File(f.data, _mode(f.mode, fs_group)) for path, f in files.items()}
    if _current(target) == want:
        return False
    old = os.readlink(target / DATA) if (target / DATA).is_symlink() else None
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime()) + f"{time.monotonic_ns() % 10**9}"
    payload = target / stamp
    payload.mkdir(mode=0o755)
    for rel, f in want.items():
        path = payload / rel
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        path.write_bytes(f.data)
        if fs_group is not None:
            os.chown(path, -1, fs_group)
        path.chmod(f.mode)
    if fs_group is not None:
        for d in [payload, *[p for p in payload.rglob("*") if p.is_dir()]]:
            os.chown(d, -1, fs_group)
    tmp = target / "..data_tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(stamp)
    tmp.rename(target / DATA)
    tops = {rel.split("/", 1)[0] for rel in want}
    for top in tops:
        link = target / top
        if not link.is_symlink():
            link.symlink_to(f"{DATA}/{top}")
    for entry in target.iterdir():
        if entry.name.startswith(".."):
            continue
        if entry.name not in tops and entry.is_symlink():
            entry.unlink()
    if old is not None:
        shutil.rmtree(target / old, ignore_errors=True)
    return True


def _mode(mode: int, fs_group: int | None) -> int:
    """With an ``fsGroup`` the group may read what the owner may (as the kubelet's ownership pass)."""
    if fs_group is None:
        return mode
    return mode | 0o040 if mode & 0o400 else mode


# -- volumes on the node's disk ------------------------------------------------------------------


def host_path(vol: JSON, hostpath_root: pathlib.Path) -> pathlib.Path:
    """Where a ``hostPath`` volume lives: under the node's own ``hostpath_root``, not the host's root."""
    rel = str(vol["hostPath"]["path"]).lstrip("/")
    return hostpath_root / rel


def prepare_local(vol: JSON, target: pathlib.Path, hostpath_root: pathlib.Path, fs_group: int | None) -> None:
    """An ``emptyDir`` made at ``target`` (group-owned by ``fs_group``), a ``hostPath`` made or checked
    by its ``type``; other volume types are left alone."""
    if "emptyDir" in vol:
        if not target.exists():
            target.mkdir(parents=True)
            target.chmod(0o777)
            if fs_group is not None:
                os.chown(target, -1, fs_group)
                target.chmod(0o2777)
    elif "hostPath" in vol:
        path = host_path(vol, hostpath_root)
        kind = vol["hostPath"].get("type", "")
        if kind == "DirectoryOrCreate":
            path.mkdir(parents=True, exist_ok=True)
        elif kind == "FileOrCreate":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch(exist_ok=True)
        elif kind == "Directory" and not path.is_dir():
            raise MountError(f"hostPath type check failed: {path} is not a directory")
        elif kind == "File" and not path.is_file():
            raise MountError(f"hostPath type check failed: {path} is not a file")
        elif kind and kind not in ("Directory", "File") and not path.exists():
            raise MountError(f"hostPath type check failed: {path} does not exist")
