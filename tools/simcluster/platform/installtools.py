"""helm, kustomize and kubectl, built from Go modules by ``tools/deploytools/build.sh`` (cached).

``tool(name)`` is the binary's path: from ``$DEPLOYTOOLS_BIN`` or the (idempotent) build script's
output. ``run(name, *args)`` runs it and returns its stdout, raising with its stderr on failure.
"""

from __future__ import annotations

import functools
import os
import pathlib
import subprocess
from collections.abc import Mapping
from typing import Any

import yaml

from simcluster.platform.controlplane import REPO

CHART = REPO / "charts" / "nova-operator"


@functools.cache
def bindir() -> pathlib.Path:
    env = os.environ.get("DEPLOYTOOLS_BIN")
    if env:
        return pathlib.Path(env)
    out = subprocess.run(
        ["bash", str(REPO / "tools" / "deploytools" / "build.sh")],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return pathlib.Path(out.stdout.strip().splitlines()[-1])


def tool(name: str) -> pathlib.Path:
    return bindir() / name


class ToolError(RuntimeError):
    def __init__(self, argv: list[str], code: int, stderr: str) -> None:
        super().__init__(f"{' '.join(argv)} exited {code}: {stderr.strip()}")
        self.code = code
        self.stderr = stderr


def run(name: str, *args: str, env: Mapping[str, str] | None = None, timeout: float = 300) -> str:
    argv = [str(tool(name)), *args]
    full_env = {**os.environ, **(env or {})}
    done = subprocess.run(argv, capture_output=True, text=True, env=full_env, timeout=timeout, check=False)
    if done.returncode != 0:
        raise ToolError(argv, done.returncode, done.stderr)
    return done.stdout


def docs(text: str) -> list[dict[str, Any]]:
    """The objects in a multi-document YAML stream (empty documents dropped)."""
    return [d for d in yaml.safe_load_all(text) if d]


def helm_template(release: str, namespace: str, *flags: str) -> list[dict[str, Any]]:
    """``helm template`` of the chart; ``flags`` are helm's (``--set``, ``--set-json``, ``-f`` ...)."""
    return docs(run("helm", "template", release, str(CHART), "--namespace", namespace, *flags))


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in objects if d.get("kind") == kind]
