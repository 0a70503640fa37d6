"""Issue 40: ``make uninstall`` warns that the CRDs take every Nova and NovaCompute with them, asks on a
terminal, and deletes only with ``yes`` or ``FORCE=1``; without a terminal only with ``FORCE=1`` (kubectl
replaced by a recorder)."""

from __future__ import annotations

import os
import pathlib
import pty
import subprocess

import pytest


@pytest.fixture
def kubectl(tmp_path: pathlib.Path) -> pathlib.Path:
    """A bin dir whose kubectl records its arguments in ``calls``."""
    script = tmp_path / "kubectl"
    script.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "calls"}\n')
    script.chmod(0o755)
    return tmp_path


def _make(repo_root: pathlib.Path, bindir: pathlib.Path, *args: str, answer: str | None) -> tuple[int, str]:
    """``make uninstall`` with stdin a pseudo-terminal that types ``answer`` (None: stdin is no terminal)."""
    argv = ["make", "--no-print-directory", "uninstall", f"DEPLOYTOOLS={bindir}", *args]
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE", "MAKEFLAGS")}
    if answer is None:
        done = subprocess.run(
            argv, cwd=repo_root, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=60
        )
        return done.returncode, done.stderr
    main, sub = pty.openpty()
    try:
        os.write(main, f"{answer}\n".encode())
        done = subprocess.run(
            argv, cwd=repo_root, stdin=sub, capture_output=True, text=True, env=env, timeout=60
        )
    finally:
        os.close(main)
        os.close(sub)
    return done.returncode, done.stderr


def _calls(bindir: pathlib.Path) -> list[str]:
    calls = bindir / "calls"
    return calls.read_text().splitlines() if calls.exists() else []


WARNING = "EVERY Nova and NovaCompute"


def test_on_a_terminal_anything_but_yes_deletes_nothing(
    repo_root: pathlib.Path, kubectl: pathlib.Path
) -> None:
    code, err = _make(repo_root, kubectl, answer="y")
    assert code != 0
    assert WARNING in err
    assert "nothing deleted" in err
    assert _calls(kubectl) == []


def test_on_a_terminal_yes_deletes_the_crds(repo_root: pathlib.Path, kubectl: pathlib.Path) -> None:
    code, err = _make(repo_root, kubectl, answer="yes")
    assert code == 0, err
    assert WARNING in err
    assert _calls(kubectl) == ["delete --ignore-not-found -k config/crd"]


def test_force_deletes_without_asking(repo_root: pathlib.Path, kubectl: pathlib.Path) -> None:
    code, err = _make(repo_root, kubectl, "FORCE=1", answer="no")
    assert code == 0, err
    assert WARNING in err
    assert _calls(kubectl) == ["delete --ignore-not-found -k config/crd"]


def test_without_a_terminal_it_deletes_nothing_unless_forced(
    repo_root: pathlib.Path, kubectl: pathlib.Path
) -> None:
    code, err = _make(repo_root, kubectl, answer=None)
    assert code != 0
    assert WARNING in err
    assert "FORCE=1" in err
    assert _calls(kubectl) == []
    code, err = _make(repo_root, kubectl, "FORCE=1", answer=None)
    assert code == 0, err
    assert _calls(kubectl) == ["delete --ignore-not-found -k config/crd"]
