"""Every value the operator writes fits the limit that checks it (issue 26 item 8).

A value over its limit makes the API server refuse the whole write, on every pass: a condition
message over the CRD's 32,768 characters, more than 8 cells in status, a ``config-base`` label
over 63 characters for NovaCompute names of 57 to 63.
"""

from __future__ import annotations

import pathlib
import re
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from nova_operator import conditions, naming
from nova_operator.decisions.cells import parse_cells_report
from nova_operator.models.meta import CONDITION_MESSAGE_MAX
from nova_operator.models.nova import CELL_NAME_MAX, MAX_CELLS
from nova_operator.models.novacompute import NovaCompute
from nova_operator.renderers import compute_pool

NOW = datetime(2026, 12, 1, tzinfo=UTC)
# Kubernetes' label value: at most 63 characters, alphanumeric at both ends.
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def crd_status(repo_root: pathlib.Path, plural: str) -> dict[str, Any]:
    crd = yaml.safe_load((repo_root / "config" / "crd" / f"nova.openstack.c5c3.io_{plural}.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"])


@pytest.mark.parametrize("plural", ["novas", "novacomputes"])
def test_the_bounds_used_are_the_ones_the_generated_crds_check(repo_root: pathlib.Path, plural: str) -> None:
    status = crd_status(repo_root, plural)
    message = status["conditions"]["items"]["properties"]["message"]
    assert message["maxLength"] == CONDITION_MESSAGE_MAX
    if plural == "novas":
        assert status["cells"]["maxItems"] == MAX_CELLS
        assert status["cells"]["items"]["properties"]["name"]["maxLength"] == CELL_NAME_MAX


def test_a_condition_message_over_the_limit_is_truncated_with_a_marker() -> None:
    long = "x" * 41_598  # the length measured in the issue
    conds: list[conditions.Condition] = []
    cond = conditions.set_condition(conds, "ConfigReady", False, "Invalid", long, generation=1, now=NOW)
    assert len(cond["message"]) == CONDITION_MESSAGE_MAX
    assert cond["message"].endswith(" ... [truncated: 41598 characters in all]")
    assert cond["message"].startswith("x" * 30_000)
    again = conditions.set_condition(conds, "ConfigReady", False, "Invalid", long, generation=1, now=NOW)
    assert again == cond  # the same input, the same text: a second pass writes nothing


def test_a_message_at_the_limit_is_kept_whole() -> None:
    exact = "é" * CONDITION_MESSAGE_MAX  # characters, as the API server counts them, not bytes
    assert conditions.bounded_message(exact) == exact
    assert conditions.bounded_message("short") == "short"


def test_at_most_8_cells_are_published_cell0_first() -> None:
    uuids = [f"{i:08x}-0000-4000-8000-000000000000" for i in range(12)]
    report = "\n".join(f"cell{i}={u}" for i, u in enumerate(uuids))
    cells = parse_cells_report(report)
    assert len(cells) == MAX_CELLS
    assert cells[0] == {"name": "cell0", "uuid": uuids[0]}
    assert [c["name"] for c in cells] == [f"cell{i}" for i in range(MAX_CELLS)]


def test_a_cell_name_longer_than_the_status_allows_is_not_published() -> None:
    u0, u1 = "00000000-0000-4000-8000-000000000000", "11111111-0000-4000-8000-000000000000"
    report = f"cell0={u0}\n{'c' * (CELL_NAME_MAX + 1)}={u1}\n"
    assert parse_cells_report(report) == [{"name": "cell0", "uuid": u0}]


def pool(name: str) -> NovaCompute:
    return NovaCompute.model_validate(
        {
            "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
            "kind": "NovaCompute",
            "metadata": {"name": name, "namespace": "openstack", "uid": "u1"},
            "spec": {"novaRef": {"name": "nova"}, "nodeSelector": {"pool": "p"}},
        }
    )


@pytest.mark.parametrize("length", [56, 57, 60, 63])
def test_the_config_base_label_fits_for_every_novacompute_name_length(length: int) -> None:
    name = ("r" * (length - 1)) + "7"
    cm = compute_pool.config_map(pool(name), "[DEFAULT]\n")
    value = cm["metadata"]["labels"][naming.CONFIG_BASE_LABEL]
    assert len(value) <= naming.LABEL_VALUE_MAX
    assert LABEL_VALUE.match(value)
    assert value == compute_pool.config_base_label(name)  # what the prune selects by
    if length <= 56:
        assert value == f"{name}-config"  # the spec's value, unchanged while it fits


def test_fitted_label_values_are_deterministic_and_distinct() -> None:
    a, b = "a" * 62 + "1", "a" * 62 + "2"  # share the kept prefix
    assert naming.label_value(a + "-config") == naming.label_value(a + "-config")
    assert naming.label_value(a + "-config") != naming.label_value(b + "-config")
    assert naming.config_base_label("nova") == "nova-config"
