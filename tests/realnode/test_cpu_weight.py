"""``realnode.cpu_weight``: a node's cgroup root gets the weight of the pods it runs, on a cgroup tree
made in a temporary directory (``test_node.py`` checks a started node's)."""

from __future__ import annotations

import pathlib

import pytest
from realnode import cpu_weight
from realnode.node import Node


def _tree(tmp_path: pathlib.Path, root: str) -> pathlib.Path:
    (tmp_path / "cpu" / root).mkdir(parents=True)
    (tmp_path / "cpu" / root / "cpu.shares").write_text("1024\n")  # what the kernel gives a new cgroup
    return tmp_path


def test_a_nodes_cgroup_root_weighs_as_many_sessions_as_a_control_nodes_pods(tmp_path: pathlib.Path) -> None:
    root = Node(1, "abc123", tmp_path / "state").cgroup_root
    cgroups = _tree(tmp_path, root)
    written = cpu_weight.weigh(root, cgroups=cgroups)
    assert written == cgroups / "cpu" / root / "cpu.shares"
    assert cpu_weight.shares(root, cgroups) == cpu_weight.NODE_CPU_SHARES
    assert cpu_weight.NODE_CPU_SHARES > cpu_weight.SESSION_SHARES


def test_a_given_weight_is_written_and_one_out_of_the_kernels_range_refused(tmp_path: pathlib.Path) -> None:
    cgroups = _tree(tmp_path, "realnode-x-1")
    cpu_weight.weigh("realnode-x-1", 2048, cgroups)
    assert cpu_weight.shares("realnode-x-1", cgroups) == 2048
    for wrong in (1, 262145):
        with pytest.raises(ValueError, match="262144"):
            cpu_weight.weigh("realnode-x-1", wrong, cgroups)
    assert cpu_weight.shares("realnode-x-1", cgroups) == 2048


def test_a_missing_cgroup_root_is_an_error_not_a_new_file(tmp_path: pathlib.Path) -> None:
    (tmp_path / "cpu").mkdir()
    with pytest.raises(FileNotFoundError, match="realnode-gone-1"):
        cpu_weight.weigh("realnode-gone-1", cgroups=tmp_path)
    assert not (tmp_path / "cpu" / "realnode-gone-1").exists()
