"""Logging: one stream of JSON lines (ts, level, logger, msg, the reconcile's context), whoever logs."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import sys
import threading
import warnings
from collections.abc import Iterator

import pytest
import structlog
from simcluster.client import jsonlog

from nova_operator import log

CONTEXT = {"controller": "nova", "namespace": "ns", "name": "n", "reconcile_id": "r1"}


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Each test configures logging globally; put back what tests/conftest.py set up."""
    yield
    structlog.reset_defaults()
    log.configure(fmt="console", level="info")


def test_json_lines_start_with_ts_level_logger_msg_then_the_reconcile_context(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log.configure(fmt="json", level="info")
    with structlog.contextvars.bound_contextvars(**CONTEXT):
        structlog.get_logger("nova_operator.nova").info("applied", kind="Deployment")
    structlog.get_logger("x").debug("hidden at info level")
    structlog.get_logger().warning("no name given")
    raw = capsys.readouterr().err
    first, second = jsonlog.records(raw)
    assert list(first) == ["ts", "level", "logger", "msg", *CONTEXT, "kind"]
    assert first["ts"].endswith("Z")  # RFC 3339 in UTC
    assert (first["level"], first["logger"], first["msg"], first["kind"]) == (
        "info",
        "nova_operator.nova",
        "applied",
        "Deployment",
    )
    assert {k: first[k] for k in CONTEXT} == CONTEXT
    assert (second["level"], second["logger"], second["msg"]) == ("warning", "nova_operator", "no name given")
    assert not set(CONTEXT) & set(second)


def test_a_call_key_named_like_a_record_key_does_not_replace_it(capsys: pytest.CaptureFixture[str]) -> None:
    log.configure(fmt="json", level="info")
    structlog.get_logger("a").info("the message", msg="mine", level="x", logger="y", ts="z")
    (entry,) = jsonlog.records(capsys.readouterr().err)
    assert (entry["msg"], entry["level"], entry["logger"]) == ("the message", "info", "a")
    assert (entry["msg_"], entry["ts_"]) == ("mine", "z")  # level and logger are the record's own


@pytest.mark.parametrize("name", ["aiohttp.client", "kubernetes_asyncio.client.rest", "keystoneauth.session"])
def test_stdlib_records_of_the_libraries_are_json_with_the_reconcile_context(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    log.configure(fmt="json", level="debug")
    with structlog.contextvars.bound_contextvars(**CONTEXT):
        logging.getLogger(name).warning("connection to %s lost", "api:6443")
        logging.getLogger(name).info("below the libraries' floor")  # their info/debug carry bodies
        logging.getLogger(name).debug("REQ: curl -H 'X-Auth-Token: secret'")
    (entry,) = jsonlog.records(capsys.readouterr().err)
    assert (entry["level"], entry["logger"], entry["msg"]) == ("warning", name, "connection to api:6443 lost")
    assert {k: entry[k] for k in CONTEXT} == CONTEXT


def test_a_traceback_is_the_records_exception_key_never_plain_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log.configure(fmt="json", level="info")
    try:
        raise RuntimeError("step failed")
    except RuntimeError:
        structlog.get_logger("nova_operator.nova").exception("reconcile failed")
        logging.getLogger("kubernetes_asyncio").exception("watch failed")
    own, foreign = jsonlog.records(capsys.readouterr().err)
    for entry in (own, foreign):
        assert entry["level"] == "error"
        assert entry["exception"].startswith("Traceback (most recent call last):")
        assert entry["exception"].endswith("RuntimeError: step failed")
    assert (own["msg"], foreign["msg"], foreign["logger"]) == (
        "reconcile failed",
        "watch failed",
        "kubernetes_asyncio",
    )


def test_python_warnings_are_json_records(capsys: pytest.CaptureFixture[str]) -> None:
    log.configure(fmt="json", level="info")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("this API goes away", DeprecationWarning, stacklevel=1)
    (entry,) = jsonlog.records(capsys.readouterr().err)
    assert (entry["level"], entry["logger"], entry["msg"]) == ("warning", "py.warnings", "this API goes away")
    assert entry["category"] == "DeprecationWarning"
    assert entry["source"].startswith(__file__)


def test_asyncio_errors_are_json_records(capsys: pytest.CaptureFixture[str]) -> None:
    log.configure(fmt="json", level="info")

    async def fails() -> None:
        raise ValueError("nobody awaited me")

    async def main() -> None:
        task = asyncio.ensure_future(fails())
        await asyncio.sleep(0)
        del task

    asyncio.run(main())
    gc.collect()
    (entry,) = jsonlog.records(capsys.readouterr().err)
    assert (entry["level"], entry["logger"]) == ("error", "asyncio")
    assert entry["msg"].startswith("Task exception was never retrieved")
    assert entry["exception"].endswith("ValueError: nobody awaited me")


def test_uncaught_exceptions_inside_process_hooks_are_json_records(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log.configure(fmt="json", level="info")
    saved = (sys.excepthook, threading.excepthook, sys.unraisablehook)
    with log.process_hooks():
        try:
            raise KeyError("main")
        except KeyError as exc:
            sys.excepthook(KeyError, exc, exc.__traceback__)

        def thread_body() -> None:
            raise OSError("in a thread")

        t = threading.Thread(target=thread_body, name="worker-1")
        t.start()
        t.join()

        class Leaky:
            def __del__(self) -> None:
                raise RuntimeError("in __del__")

        Leaky()
        gc.collect()
    assert (sys.excepthook, threading.excepthook, sys.unraisablehook) == saved
    main, thread, unraisable = jsonlog.records(capsys.readouterr().err)
    assert (main["level"], main["msg"]) == ("critical", "uncaught exception, exiting")
    assert main["exception"].endswith("KeyError: 'main'")
    assert (thread["msg"], thread["thread"]) == ("uncaught exception in a thread", "worker-1")
    assert thread["exception"].endswith("OSError: in a thread")
    assert unraisable["msg"].startswith("Exception ignored")
    assert unraisable["exception"].endswith("RuntimeError: in __del__")


def test_credentials_never_reach_the_stream(capsys: pytest.CaptureFixture[str]) -> None:
    log.configure(fmt="json", level="info")
    structlog.get_logger("a").info(
        "connecting to mysql+pymysql://nova:hunter2@db:3306/nova",
        password="hunter2",
        token="gAAAA-token",
        headers={"Authorization": "Bearer abc", "Accept": "json"},
        urls=["rabbit://u:hunter2@mq:5672/"],
    )
    logging.getLogger("aiohttp").warning("failed: https://admin:hunter2@keystone/v3")
    err = capsys.readouterr().err
    for secret in ("hunter2", "gAAAA", "Bearer"):
        assert secret not in err
    own, foreign = jsonlog.records(err)
    assert own["msg"] == "connecting to mysql+pymysql://nova:***@db:3306/nova"
    assert (own["password"], own["token"], own["headers"]) == (
        "***",
        "***",
        {"Authorization": "***", "Accept": "json"},
    )
    assert own["urls"] == ["rabbit://u:***@mq:5672/"]
    assert foreign["msg"] == "failed: https://admin:***@keystone/v3"


def test_the_error_line_of_a_process_that_cannot_start() -> None:
    entry = json.loads(log.error_line("json", "nova-operator", "bad  flag\n --x (see --help)"))
    assert list(entry) == ["ts", "level", "logger", "msg"]
    assert (entry["level"], entry["logger"], entry["msg"]) == (
        "error",
        "nova_operator.cli",
        "bad flag --x (see --help)",
    )
    assert log.error_line("console", "nova-operator", "bad flag") == "nova-operator: error: bad flag"


def test_console_format_renders_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    log.configure(fmt="console", level="debug")
    structlog.get_logger("x").debug("hello", key="value")
    logging.getLogger("aiohttp").warning("from the library")
    err = capsys.readouterr().err
    assert "hello" in err
    assert "key" in err
    assert "from the library" in err
    with pytest.raises(json.JSONDecodeError):
        json.loads(err.splitlines()[0])


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_a_traceback_never_shows_local_variables(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    log.configure(fmt=fmt, level="info")  # type: ignore[arg-type]

    def failing_step() -> None:
        password = "s3cr3t-local-value"
        raise RuntimeError(f"step failed ({len(password)} chars) at mysql://nova:hunter2@db/nova")

    try:
        failing_step()
    except RuntimeError:
        structlog.get_logger("t").exception("reconcile failed")
        logging.getLogger("aiohttp").exception("request failed")
    err = capsys.readouterr().err
    assert err.count("RuntimeError: step failed") == 2
    assert "s3cr3t-local-value" not in err
    assert "hunter2" not in err  # the exception's message is redacted too
