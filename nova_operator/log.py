"""structlog set-up: JSON lines by default, a console renderer on a TTY.

Every log line carries whatever is bound in structlog's contextvars; the controller binds
controller, namespace, name and reconcile_id around each reconcile, so lines a reconciler
writes with ``structlog.get_logger()`` carry them without passing anything around.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def default_format() -> Literal["json", "console"]:
    return "console" if sys.stderr.isatty() else "json"


def _stderr_logger(*args: object) -> structlog.PrintLogger:
    """A logger on the *current* ``sys.stderr`` (resolved per logger, so redirection is honoured)."""
    return structlog.PrintLogger(sys.stderr)


def configure(*, fmt: Literal["json", "console"] = "json", level: str = "info") -> None:
    """Configure structlog (and route stdlib logging, e.g. aiohttp's, through the same level)."""
    lvl = LEVELS[level.lower()]
    # Tracebacks are plain in both formats: rich tracebacks print every frame's local variables,
    # and a reconcile's locals can hold a password or a DSN.
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback)
        if fmt == "console"
        else structlog.processors.JSONRenderer()
    )
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    if fmt == "json":
        processors.append(structlog.processors.format_exc_info)
    processors.append(renderer)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(lvl, logging.WARNING), stream=sys.stderr, format="%(name)s: %(message)s")
