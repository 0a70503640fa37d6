"""What a stopped local cluster leaves of its work directory (``simcluster.platform.workdir``): its
logs alone, nothing outside the directory touched, nothing removed while a mount is below it."""

from __future__ import annotations

import os
import pathlib
import subprocess

from simcluster.platform.workdir import keep_logs_only, mounts_below


def _tree(root: pathlib.Path, outside: pathlib.Path) -> None:
    """A work directory shaped like a run's: logs at several depths, data, links in and out."""
    (root / "etcd" / "member" / "snap").mkdir(parents=True)
    (root / "etcd" / "member" / "snap" / "db").write_bytes(b"x" * 4096)
    (root / "etcd.log").write_text("etcd started\n")
    pods = root / "real" / "realnodes" / "node-2" / "varlog" / "pods" / "openstack_nova-api_1" / "api"
    pods.mkdir(parents=True)
    (pods / "0.log").write_text("GET /v2.1 200\n")
    containers = root / "real" / "realnodes" / "node-2" / "varlog" / "containers"
    containers.mkdir()
    (containers / "nova-api_openstack_api-1.log").symlink_to(pods / "0.log")
    (root / "real" / "realnodes" / "node-2" / "kubelet.log").write_text("node Ready\n")
    layers = root / "real" / "realnodes" / "node-2" / "containerd" / "snapshots" / "1" / "fs" / "usr"
    layers.mkdir(parents=True)
    (layers / "python3").write_bytes(b"y" * 8192)
    (layers / "locked").mkdir()
    (layers / "locked" / "file").write_text("z")
    (layers / "locked").chmod(0o500)
    (root / "kubeconfig").write_text("apiVersion: v1\n")
    (root / "kubectl.log.d").mkdir()  # a directory named like a log is not a log
    (root / "kubectl.log.d" / "cache").write_text("c")
    # a file hard-linked from outside (a node's copy of the image store) frees nothing
    (outside / "store").mkdir()
    (outside / "store" / "layer").write_bytes(b"s" * 1024)
    os.link(outside / "store" / "layer", root / "layer-copy")
    # links out of the directory: the link goes, never what it names
    (root / "host-usr").symlink_to(outside / "store", target_is_directory=True)
    (root / "host-file.log").symlink_to(outside / "store" / "layer")


def _left(root: pathlib.Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir())


def test_only_the_logs_are_left_and_nothing_outside_is_touched(tmp_path: pathlib.Path) -> None:
    root, outside = tmp_path / "run", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    _tree(root, outside)

    said: list[str] = []
    kept = keep_logs_only(root, said.append)

    assert said == [f"removing the run's data from {root}, keeping its logs ..."]
    assert _left(root) == [
        "etcd.log",
        "real/realnodes/node-2/kubelet.log",
        "real/realnodes/node-2/varlog/pods/openstack_nova-api_1/api/0.log",
    ]
    # the directories that held only data are gone, those holding logs stay
    assert sorted(p.name for p in root.iterdir()) == ["etcd.log", "real"]
    assert (kept.files, kept.size, kept.refused, kept.failed) == (3, 13 + 14 + 11, "", ())
    assert kept.removed == 4096 + 8192 + 1 + 15 + 1  # the hard-linked layer freed nothing
    assert (outside / "store" / "layer").read_bytes() == b"s" * 1024
    summary = kept.summary()
    assert summary.startswith(f"the run's logs are kept in {root} (3 files, 0.0 MiB)")
    assert summary.endswith("the rest of its data is removed (0.0 MiB freed)")


def test_a_second_pass_keeps_the_same_logs(tmp_path: pathlib.Path) -> None:
    root, outside = tmp_path / "run", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    _tree(root, outside)
    keep_logs_only(root)
    again = keep_logs_only(root)
    assert (again.files, again.removed, again.failed) == (3, 0, ())
    assert len(_left(root)) == 3


def test_a_tree_without_logs_goes_whole_and_deep_nesting_is_walked(tmp_path: pathlib.Path) -> None:
    """An image layer's depth, a directory of many files, and a root that holds no log at all: the
    root stays, empty; every byte of its regular files is counted freed."""
    root = tmp_path / "run"
    deep = root / "containerd" / "snapshots"
    deep.mkdir(parents=True)
    for _ in range(1200):  # deeper than Python's recursion limit
        deep = deep / "d"
        deep.mkdir()
    (deep / "bottom").write_bytes(b"b" * 100)
    wide = root / "layer"
    wide.mkdir()
    for i in range(2000):
        (wide / f"f{i}").write_bytes(b"w" * 10)
    os.mkfifo(root / "fifo")

    kept = keep_logs_only(root)

    assert list(root.iterdir()) == []
    assert (kept.files, kept.size, kept.removed, kept.failed) == (0, 0, 100 + 2000 * 10, ())


def test_a_log_deep_below_keeps_its_directories_and_only_them(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "run"
    pod = root / "node" / "varlog" / "pods" / "p" / "c"
    pod.mkdir(parents=True)
    (pod / "0.log").write_text("line\n")
    (pod / "0.log.20261207-1").write_text("rotated, not a log by name\n")
    (root / "node" / "varlog" / "pods" / "q").mkdir()  # a sibling without logs
    (root / "node" / "varlog" / "pods" / "q" / "x").write_text("x")
    (root / "node" / "containerd").mkdir()
    (root / "node" / "containerd" / "meta.db").write_bytes(b"m" * 50)

    kept = keep_logs_only(root)

    assert _left(root) == ["node/varlog/pods/p/c/0.log"]
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir()) == [
        "node",
        "node/varlog",
        "node/varlog/pods",
        "node/varlog/pods/p",
        "node/varlog/pods/p/c",
    ]
    assert (kept.files, kept.removed) == (1, len("rotated, not a log by name\n") + 1 + 50)


def test_a_missing_directory_is_reported_not_raised(tmp_path: pathlib.Path) -> None:
    kept = keep_logs_only(tmp_path / "never-made")
    assert kept.refused == "it does not exist"
    assert "as it is: it does not exist" in kept.summary()


def test_nothing_is_removed_while_something_is_mounted_below(tmp_path: pathlib.Path) -> None:
    root, outside = tmp_path / "run dir", tmp_path / "outside"  # a space: escaped in /proc/self/mounts
    root.mkdir()
    outside.mkdir()
    _tree(root, outside)
    before = _left(root)
    point = root / "real" / "realnodes" / "node-2" / "rootfs"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(point)], check=True)
    try:
        (point / "host-data").write_text("not the run's")
        assert mounts_below(root) == [str(point)]
        kept = keep_logs_only(root)
        assert kept.refused.startswith("1 mounts are still below it")
        assert str(point) in kept.summary()
        assert _left(root) == sorted([*before, "real/realnodes/node-2/rootfs/host-data"])
    finally:
        subprocess.run(["umount", str(point)], check=True)
    assert mounts_below(root) == []
