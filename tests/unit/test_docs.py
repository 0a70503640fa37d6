"""The generated docs pages (docs/reference/, docs/troubleshooting.md) are current and complete."""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from nova_operator.install import crd_reference, docs, reasons, troubleshooting
from nova_operator.models import crd

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


def test_the_committed_pages_are_current() -> None:
    for name, text in docs.pages().items():
        assert (DOCS / name).read_text() == text, f"docs/{name} is stale: run make manifests"
    assert docs.main(["verify", str(DOCS)]) == 0


def test_verify_fails_on_a_stale_or_missing_page_and_write_repairs_it(tmp_path: pathlib.Path) -> None:
    assert docs.main(["verify", str(tmp_path)]) == 1
    assert docs.main(["write", str(tmp_path)]) == 0
    assert docs.main(["verify", str(tmp_path)]) == 0
    page = tmp_path / "troubleshooting.md"
    page.write_text(page.read_text().replace("DBSyncFailed", "DBSyncBroken", 1))
    assert docs.stale(tmp_path) == ["troubleshooting.md"]
    assert docs.main(["verify", str(tmp_path)]) == 1
    assert docs.main(["bogus", str(tmp_path)]) == 2


def test_troubleshooting_has_one_entry_per_reason_of_the_table() -> None:
    text = troubleshooting.render()
    entries = re.findall(r"^### (\w+) \((Nova|NovaCompute), (True|False)\)$", text, re.M)
    table = [(r.reason, r.kind, r.status) for r in reasons.REASONS]
    assert sorted(entries) == sorted(table)
    for r in reasons.REASONS:
        entry = text.split(f"### {r.reason} ({r.kind}, {r.status})\n", 1)[1].split("\n###", 1)[0]
        assert f"- **Means:** {r.meaning}" in entry
        assert f"- **Do:** {r.action}" in entry
        for cond in r.conditions:
            assert cond in entry
    for anchor in re.findall(r"\]\(#([a-z0-9-]+)\)", text):
        assert f'<a id="{anchor}"></a>' in text, anchor


def _properties(path: str, schema: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield path, schema
    if crd_reference._vendored(schema) is not None:
        return
    if schema.get("type") == "array":
        schema, path = schema.get("items", {}), f"{path}[]"
    elif "additionalProperties" in schema:
        schema, path = schema["additionalProperties"], f"{path}.<key>"
    for name, child in schema.get("properties", {}).items():
        yield from _properties(f"{path}.{name}", child)


@pytest.mark.parametrize("kind", crd.KINDS, ids=lambda k: k.plural)
def test_the_crd_reference_lists_every_property_default_enum_and_rule(kind: crd.Kind) -> None:
    page = crd_reference.render(kind)
    root = crd.crd_object(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([^`]+)` \|.*$", page, re.M)}
    walked = [p for part in ("spec", "status") for p in _properties(part, root["properties"][part])]
    assert len(walked) > 40
    for path, schema in walked:
        assert path in rows, path
        row = rows[path]
        if schema.get("description"):
            assert crd_reference._cell(schema["description"]) in row, path
        if "default" in schema:
            assert crd_reference._cell(crd_reference._code(schema["default"])) in row, path
        for value in schema.get("enum", []):
            assert crd_reference._code(value) in row, path
    messages = [
        rule["message"]
        for _, schema in [("", root), *walked]
        for s in (schema, schema.get("items", {}), schema.get("additionalProperties", {}))
        if isinstance(s, Mapping)
        for rule in s.get("x-kubernetes-validations", [])
        if rule.get("message")
    ]
    assert messages
    for message in messages:
        assert crd_reference._cell(message) in page, message
    for column in crd.crd_object(kind)["spec"]["versions"][0]["additionalPrinterColumns"]:
        assert f"| {column['name']} |" in page


def test_affinity_is_named_not_expanded() -> None:
    page = crd_reference.render(crd.KINDS[0])
    assert "| `spec.api.deployment.affinity` | object |" in page
    assert "the Kubernetes `affinity` schema" in page
    assert "spec.api.deployment.affinity.nodeAffinity" not in page


HANDWRITTEN = ("README.md", "install.md", "operations.md", "upgrading-operator.md")
ROOT = DOCS.parent


def _schema_paths() -> set[str]:
    paths = set()
    for kind in crd.KINDS:
        root = crd.crd_object(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for part in ("spec", "status"):
            paths |= {p.replace("[]", "") for p, _ in _properties(part, root["properties"][part])}
    return paths


@pytest.mark.parametrize("page", HANDWRITTEN)
def test_the_handwritten_pages_name_only_fields_the_crds_have(page: str) -> None:
    text = (DOCS / page).read_text()
    named = {m.replace("[]", "") for m in re.findall(r"`((?:spec|status)\.[A-Za-z0-9_.\[\]]+)`", text)}
    assert named or page == "README.md"
    assert not named - _schema_paths()


def _values_keys(values: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in values.items():
        yield f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _values_keys(value, f"{prefix}{key}.")


def test_install_names_only_chart_values_config_paths_and_make_targets_that_exist() -> None:
    import yaml

    text = (DOCS / "install.md").read_text()
    keys = set(_values_keys(yaml.safe_load((ROOT / "charts/nova-operator/values.yaml").read_text())))
    table = text.split("| value | default |", 1)[1].split("\n\n", 1)[0]
    named = []
    for row in table.splitlines()[2:]:
        head = ""
        for name in re.findall(r"`([A-Za-z.]+)`", row.split("|")[1]):
            full = head + name if name.startswith(".") else name
            head = full.rsplit(".", 1)[0] if "." in full else full
            named.append(full)
    named += re.findall(r"--set ([A-Za-z.]+)=", text)
    assert len(named) > 20
    assert not set(named) - keys
    for path in re.findall(r"\bconfig/[a-z-]+(?:/[a-z_.-]+)*", text):
        assert (ROOT / path).exists(), path
    targets = set(re.findall(r"^([a-z0-9-]+):", (ROOT / "Makefile").read_text(), re.M))
    for page in HANDWRITTEN:
        for target in re.findall(r"`make ([a-z0-9-]+)", (DOCS / page).read_text()):
            assert target in targets, (page, target)


def test_operations_says_what_to_do_for_every_shipped_alert() -> None:
    from nova_operator.install import monitoring

    section = (DOCS / "operations.md").read_text().split("## When an alert fires", 1)[1]
    rows = set(re.findall(r"^\| `(\w+)` \|", section, re.M))
    shipped = {rule["alert"] for rule in monitoring.alert_rules(monitoring.selector("j", "n"))}
    assert rows == shipped


TOOL_FLAGS = frozenset(
    {
        # helm, kubectl, openstack, uwsgi, nova-manage, docker and buildah: the tools' own flags the pages use
        "--all", "--create-namespace", "--field-selector", "--for", "--force-conflicts", "--from",
        "--help", "--live-migration", "--previous", "--reuse-values", "--server-side", "--set",
        "--show-only", "--timeout", "--type", "--http-keepalive", "--http-keepalive-timeout",
        "--lazy-apps", "--req-logger", "--log-req-encoder", "--log-encoder", "--raw", "--all-cells",
        "--before", "--build-arg",
    }
)  # fmt: skip


def test_every_operator_flag_the_pages_name_exists() -> None:
    from nova_operator import cli

    options = {o for action in cli.build_parser()._actions for o in action.option_strings}
    for page in HANDWRITTEN:
        named = set(re.findall(r"(?:^|[\s`(])(--[a-z][a-z-]+)", (DOCS / page).read_text(), re.M))
        unknown = named - options - TOOL_FLAGS
        assert not unknown, (page, unknown)
