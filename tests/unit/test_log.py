"""Logging: JSON lines carrying the reconcile's bound context."""

from __future__ import annotations

import json

import pytest
import structlog

from nova_operator import log


def test_json_lines_carry_the_bound_reconcile_context(capsys: pytest.CaptureFixture[str]) -> None:
    log.configure(fmt="json", level="info")
    try:
        with structlog.contextvars.bound_contextvars(
            controller="c", namespace="ns", name="n", reconcile_id="r1"
        ):
            structlog.get_logger("x").info("applied", kind="Deployment")
        structlog.get_logger("x").debug("hidden at info level")
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1
        entry = json.loads(lines[0])
        assert entry["event"] == "applied"
        assert entry["level"] == "info"
        assert (entry["controller"], entry["namespace"], entry["name"], entry["reconcile_id"]) == (
            "c",
            "ns",
            "n",
            "r1",
        )
        assert "timestamp" in entry
    finally:
        structlog.reset_defaults()


def test_console_format_renders_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    log.configure(fmt="console", level="debug")
    try:
        structlog.get_logger("x").debug("hello", key="value")
        err = capsys.readouterr().err
        assert "hello" in err
        assert "key" in err
        with pytest.raises(json.JSONDecodeError):
            json.loads(err)
    finally:
        structlog.reset_defaults()


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_a_traceback_never_shows_local_variables(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    log.configure(fmt=fmt, level="info")  # type: ignore[arg-type]

    def failing_step() -> None:
        password = "s3cr3t-local-value"
        raise RuntimeError(f"step failed ({len(password)} chars)")

    try:
        failing_step()
    except RuntimeError:
        structlog.get_logger("t").exception("reconcile failed")
    err = capsys.readouterr().err
    assert "RuntimeError: step failed" in err
    assert "s3cr3t-local-value" not in err
