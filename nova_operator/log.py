"""Logging: one stream of JSON lines (or a console format for humans), whoever logs.

A JSON line starts ``{"ts": ..., "level": ..., "logger": ..., "msg": ...}`` (``ts`` RFC 3339 in
UTC) followed by whatever is bound in structlog's contextvars and the call's own keys. The
controller binds controller, namespace, name and reconcile_id around each reconcile, so lines a
reconciler writes with ``structlog.get_logger()`` carry them without passing anything around.

Records of stdlib ``logging`` (aiohttp, kubernetes_asyncio, asyncio), Python
``warnings`` and, inside :func:`process_hooks`, uncaught exceptions go through the
same processors and renderer: no plain-text line inside the JSON stream, a traceback is the
record's ``exception`` key. Third-party libraries log at WARNING and above only, whatever the
level: their debug output carries request and response bodies (Secrets among them).
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import threading
import warnings
from collections.abc import Iterator, Mapping, MutableMapping
from types import TracebackType
from typing import Any, Literal, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
Format = Literal["json", "console"]

FIRST_KEYS = ("ts", "level", "logger", "msg")
"""The keys every JSON line starts with, in this order."""
RECONCILE_KEYS = ("controller", "namespace", "name", "reconcile_id")
"""Bound around each reconcile (runtime/controller.py): next on every line the reconcile logs."""

DEFAULT_LOGGER = "nova_operator"
THIRD_PARTY_FLOOR = logging.WARNING

_write_lock = threading.Lock()


def default_format() -> Format:
    return "console" if sys.stderr.isatty() else "json"


def _write(line: str) -> None:
    """One line to the *current* ``sys.stderr`` (so redirection is honoured), whole, never interleaved."""
    stream: TextIO = sys.stderr
    with _write_lock:
        stream.write(line + "\n")
        stream.flush()


class _Sink:
    """structlog's logger: knows its name (for ``logger``) and writes the rendered line."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name or DEFAULT_LOGGER

    def msg(self, message: str) -> None:
        _write(message)

    debug = info = warning = warn = error = critical = exception = fatal = log = msg


def _sink_factory(*args: Any) -> _Sink:
    return _Sink(args[0] if args and isinstance(args[0], str) else None)


# --------------------------------------------------------------------------- redaction

_URL_CREDENTIALS = re.compile(r"(?P<prefix>[A-Za-z][A-Za-z0-9+.-]*://[^:@/\s]*):(?P<secret>[^@/\s]+)@")
_SECRET_KEY = re.compile(r"(?i)(pass(word|wd)?|token|authorization|credentials?|secret_?key|private_?key)$")
MASK = "***"


def redact_text(text: str) -> str:
    """``scheme://user:password@host`` -> ``scheme://user:***@host`` (DSNs, transport URLs)."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m['prefix']}:{MASK}@", text)


def _redact(value: object) -> object:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: MASK if _SECRET_KEY.search(str(k)) else _redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact(v) for v in value]
    return value


def redact(logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
    """Mask credentials in URLs and the values of keys named like a secret: a safety net."""
    return {k: MASK if _SECRET_KEY.search(k) else _redact(v) for k, v in event_dict.items()}


# --------------------------------------------------------------------------- shaping


def shape(logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
    """``event`` -> ``msg``, ``timestamp`` -> ``ts``; ``ts``, ``level``, ``logger``, ``msg`` first."""
    ed: MutableMapping[str, Any] = dict(event_dict)
    msg = ed.pop("event", "")
    first = {
        "ts": ed.pop("timestamp", None),
        "level": ed.pop("level", method),
        "logger": ed.pop("logger", None) or getattr(logger, "name", None) or DEFAULT_LOGGER,
        "msg": msg if isinstance(msg, str) else str(msg),
    }
    for key in FIRST_KEYS:  # a call's own key of that name must not overwrite the record's
        if key in ed:
            ed[f"{key}_"] = ed.pop(key)
    context = {key: ed.pop(key) for key in RECONCILE_KEYS if key in ed}
    return {**first, **context, **ed}


def _shared(utc_stamper: Processor) -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.stdlib.add_logger_name,
        utc_stamper,
    ]


def _final(fmt: Format) -> list[Processor]:
    # Tracebacks are plain text in both formats, rendered before the redaction sees them: rich
    # tracebacks print every frame's local variables, and a reconcile's locals can hold a password
    # or a DSN; an exception's message can carry a URL with its credentials.
    if fmt == "console":
        return [
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            redact,
            structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback),
        ]
    return [
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
        redact,
        shape,
        structlog.processors.JSONRenderer(),
    ]


class _Handler(logging.Handler):
    """The root handler of stdlib logging: the record rendered by structlog, on the one stream."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _write(self.format(record))
        except Exception:  # logging must never raise into the caller
            self.handleError(record)


def configure(*, fmt: Format = "json", level: str = "info") -> None:
    """Configure structlog and route stdlib logging and ``warnings`` through the same renderer."""
    lvl = LEVELS[level.lower()]
    stamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    structlog.configure(
        processors=[*_shared(stamper), *_final(fmt)],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=_sink_factory,
        cache_logger_on_first_use=False,
    )
    handler = _Handler()
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=_shared(stamper),
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *_final(fmt)],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(lvl, THIRD_PARTY_FLOOR))
    logging.captureWarnings(False)
    warnings.showwarning = _show_warning


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    structlog.get_logger("py.warnings").warning(
        str(message), category=category.__name__, source=f"{filename}:{lineno}"
    )


# --------------------------------------------------------------------------- process hooks


def _excepthook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    structlog.get_logger("nova_operator").critical(
        "uncaught exception, exiting", exc_info=(exc_type, exc, tb)
    )


def _thread_excepthook(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    structlog.get_logger("nova_operator").error(
        "uncaught exception in a thread",
        thread=args.thread.name if args.thread else None,
        exc_info=(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback),
    )


def _unraisablehook(unraisable: Any) -> None:
    exc = unraisable.exc_value
    structlog.get_logger("nova_operator").error(
        unraisable.err_msg or "Exception ignored in",
        object=repr(unraisable.object),
        exc_info=(unraisable.exc_type, exc, unraisable.exc_traceback) if exc is not None else None,
    )


@contextlib.contextmanager
def process_hooks() -> Iterator[None]:
    """Uncaught exceptions (threads, ``__del__``, the main thread) as log records, not raw tracebacks.

    The previous hooks are back afterwards (``cli.main`` also runs inside tests).
    """
    saved = (sys.excepthook, threading.excepthook, sys.unraisablehook)
    sys.excepthook, threading.excepthook, sys.unraisablehook = (
        _excepthook,
        _thread_excepthook,
        _unraisablehook,
    )
    try:
        yield
    finally:
        sys.excepthook, threading.excepthook, sys.unraisablehook = saved


def error_line(fmt: Format, prog: str, message: str, **fields: object) -> str:
    """The one line a process that cannot start writes: a JSON record, or ``prog: error: ...``."""
    message = " ".join(redact_text(message).split())
    if fmt == "console":
        return f"{prog}: error: {message}"
    ed: EventDict = {"event": message, "level": "error", "logger": f"{DEFAULT_LOGGER}.cli", **fields}
    ed = structlog.processors.TimeStamper(fmt="iso", utc=True)(None, "error", ed)
    line = structlog.processors.JSONRenderer()(None, "error", shape(None, "error", redact(None, "error", ed)))
    return str(line)
