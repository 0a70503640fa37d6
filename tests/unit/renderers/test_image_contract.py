"""The image contract holds every program and path the rendered pods use, and its page is current."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from nova_operator import image_contract
from nova_operator.install import docs, image_contract_page
from nova_operator.models.nova import Nova
from nova_operator.models.novacompute import NovaCompute
from nova_operator.renderers import compute_pool as cp

REPO = Path(__file__).resolve().parents[3]
PROGRAMS = {b.name for b in image_contract.BINARIES}
# The Job and CronJob scripts: the words in command position once quoted text (awk programs,
# arguments) is removed, minus the shell's own keywords and builtins and the scripts' functions.
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
COMMAND_WORD = re.compile(
    r"(?:^|\||;|&&|\|\||\$\(|\bthen\b|\bdo\b|\belse\b|!)\s*([a-z][a-z0-9_-]*)", re.MULTILINE
)
SHELL_WORDS = {
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "while",
    "do",
    "done",
    "case",
    "esac",
    "export",
    "echo",
    "printf",
    "return",
    "exit",
    "set",
    "nm",
}


def _script_programs(script: str) -> set[str]:
    text = QUOTED.sub("''", script)
    functions = set(re.findall(r"^\s*([a-z_]+)\(\)", text, flags=re.MULTILINE))
    words = set(COMMAND_WORD.findall(text))
    assignments = set(re.findall(r"\b([a-z_]+)=", text))
    return words - SHELL_WORDS - assignments - functions


def _containers(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = obj.get("spec", {})
    template = spec.get("jobTemplate", {}).get("spec", spec).get("template", {}).get("spec", {})
    yield from template.get("initContainers", [])
    yield from template.get("containers", [])


def _pool_objects() -> list[dict[str, Any]]:
    pool = NovaCompute.model_validate(
        {
            "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
            "kind": "NovaCompute",
            "metadata": {"name": "rack8", "namespace": "openstack", "uid": "u1"},
            "spec": {"novaRef": {"name": "nova"}, "nodeSelector": {"pool": "rack8"}},
        }
    )
    inputs = cp.PoolInputs(
        image="i:1", config_map="rack8-config-abcdef12", contract_secret="c", contract_hash="f" * 64
    )
    ds = cp.daemonset(pool, inputs)
    assert ds is not None
    return [ds]


def test_every_program_a_rendered_pod_runs_is_in_the_contract(
    nova: Nova, render_all: Callable[[Nova], dict[str, Any]]
) -> None:
    seen: set[str] = set()
    for obj in [*render_all(nova).values(), *_pool_objects()]:
        for container in _containers(obj):
            commands = [container["command"]]
            commands += [
                probe["exec"]["command"]
                for key in ("readinessProbe", "livenessProbe", "startupProbe")
                if "exec" in (probe := container.get(key, {}))
            ]
            if "preStop" in container.get("lifecycle", {}):
                commands.append(container["lifecycle"]["preStop"]["exec"]["command"])
            for command in commands:
                seen.add(command[0])
                if command[0] == image_contract.SHELL:  # the scripts' own programs
                    seen |= _script_programs(command[-1])
    assert seen <= PROGRAMS, sorted(seen - PROGRAMS)
    if nova.spec.db_archive is not None:  # the full sample renders every pod: no stale entry either
        assert seen == PROGRAMS, sorted(PROGRAMS - seen)


def test_the_renderers_take_their_paths_from_the_contract(load_sample: Callable[[str], Nova]) -> None:
    from nova_operator.renderers import novaconf, workload

    assert workload.API_PASTE == image_contract.API_PASTE
    assert (workload.OPENSTACK_UID, workload.OPENSTACK_GID) == (image_contract.UID, image_contract.GID)
    assert f"web = {image_contract.NOVNC_WEB}" in novaconf.novncproxy_conf()


def test_the_contract_prints_as_json_and_as_pip_requirements_without_the_operator_installed() -> None:
    script = REPO / "nova_operator" / "image_contract.py"
    # -I: isolated, so nothing of the operator's environment is importable
    printed = subprocess.run(
        [sys.executable, "-I", str(script), "json"], capture_output=True, text=True, check=True
    )
    contract = json.loads(printed.stdout)
    assert contract["uid"] == contract["gid"] == 42424
    assert {p["path"] for p in contract["paths"]} >= {image_contract.API_PASTE, image_contract.NOVNC_WEB}
    assert image_contract.NOVA_AMQP_READY in {b["name"] for b in contract["binaries"]}
    assert (REPO / contract["nova_amqp_ready_source"]).is_file()
    pip = subprocess.run(
        [sys.executable, "-I", str(script), "pip-requirements"], capture_output=True, text=True, check=True
    )
    assert pip.stdout.split() == [
        "uWSGI==2.0.31",
        "PyMySQL",
        "pymemcache",
        "python-memcached",
        "python-binary-memcached",  # keystonemiddleware's token cache over TLS
    ]


def test_the_docs_page_is_generated_from_the_contract() -> None:
    page = (REPO / "docs" / "image-contract.md").read_text()
    assert page == image_contract_page.render() == docs.pages()["image-contract.md"]
    for program in PROGRAMS:
        assert f"`{program}`" in page
