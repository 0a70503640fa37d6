"""Log levels of the nova processes: oslo.log's and nova's per-library defaults, ``perLoggerLevels``
merged over them, and ``logging.ini`` (``spec.logging.format: json``).

Once ``[DEFAULT] log_config_append`` names a file, oslo.log configures logging from that file alone:
it ignores ``debug`` and ``default_log_levels``, and so drops its own per-library defaults too
(``oslo_log.log.setup``). The rendered ``logging.ini`` therefore carries all three itself: the root
level (``DEBUG`` under ``spec.logging.debug``, else ``spec.logging.level``), one logger per default
library level, and the user's levels over them. Under ``format: text`` oslo.log applies
``default_log_levels`` from nova.conf, which replaces the defaults as a whole: it is rendered (only
when ``perLoggerLevels`` is set) as the same merged list.

The defaults are those of the supported releases' real packages (checked by
``tests/unit/renderers/test_logging_real.py`` against each nova venv): oslo.log's
``_options.DEFAULT_LOG_LEVELS`` (2025.2 also lists ``amqplib`` and ``qpid``; the union is rendered for
every release, a level for a logger nothing uses being a no-op) followed by what
``nova.config.set_log_defaults`` adds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

OSLO_LOG_LEVELS: Final[tuple[tuple[str, str], ...]] = (
    ("amqp", "WARN"),
    ("amqplib", "WARN"),
    ("boto", "WARN"),
    ("qpid", "WARN"),
    ("sqlalchemy", "WARN"),
    ("suds", "INFO"),
    ("oslo.messaging", "INFO"),
    ("oslo_messaging", "INFO"),
    ("iso8601", "WARN"),
    ("requests.packages.urllib3.connectionpool", "WARN"),
    ("urllib3.connectionpool", "WARN"),
    ("websocket", "WARN"),
    ("requests.packages.urllib3.util.retry", "WARN"),
    ("urllib3.util.retry", "WARN"),
    ("keystonemiddleware", "WARN"),
    ("routes.middleware", "WARN"),
    ("stevedore", "WARN"),
    ("taskflow", "WARN"),
    ("keystoneauth", "WARN"),
    ("oslo.cache", "INFO"),
    ("oslo_policy", "INFO"),
    ("dogpile.core.dogpile", "INFO"),
)
"""oslo.log's ``_options.DEFAULT_LOG_LEVELS``, the union over the supported releases, in its order."""

_TRUE: Final = frozenset({"true", "1", "on", "yes"})
"""What oslo.config's BoolOpt reads as true (case-insensitive)."""


class LoggerNameError(ValueError):
    """A ``perLoggerLevels`` name oslo.log's ``logger=LEVEL`` list cannot carry."""


def _debug(extra_config: Mapping[str, Mapping[str, str]], section: str) -> bool:
    return str((extra_config.get(section) or {}).get("debug", "")).strip().lower() in _TRUE


def nova_log_levels(extra_config: Mapping[str, Mapping[str, str]]) -> tuple[tuple[str, str], ...]:
    """What ``nova.config.set_log_defaults`` appends, from ``[glance] debug`` and ``[cinder] debug``."""
    extra = [("glanceclient", "DEBUG" if _debug(extra_config, "glance") else "WARN")]
    if _debug(extra_config, "cinder"):
        extra += [("cinderclient", "DEBUG"), ("os_brick", "DEBUG")]
    return (*extra, ("oslo.privsep.daemon", "INFO"))


def _check(name: str) -> None:
    if not name or name != name.strip() or "," in name or "=" in name:
        raise LoggerNameError(
            f"spec.logging.perLoggerLevels: logger name {name!r} cannot be rendered into oslo.log's "
            "logger=LEVEL list (no ',' or '=', no leading or trailing spaces)"
        )


def log_levels(
    per_logger: Mapping[str, str], extra_config: Mapping[str, Mapping[str, str]] | None = None
) -> tuple[tuple[str, str], ...]:
    """The defaults in their order, each overridden in place by ``per_logger``, then the other
    ``per_logger`` entries by name."""
    for name in per_logger:
        _check(name)
    defaults = (*OSLO_LOG_LEVELS, *nova_log_levels(extra_config or {}))
    known = {name for name, _ in defaults}
    merged = [(name, per_logger.get(name, level)) for name, level in defaults]
    merged += [(name, per_logger[name]) for name in sorted(per_logger) if name not in known]
    return tuple(merged)


def default_log_levels(levels: Sequence[tuple[str, str]]) -> str:
    """``[DEFAULT] default_log_levels``: ``logger=LEVEL`` pairs joined by ``,``."""
    return ",".join(f"{name}={level}" for name, level in levels)


def logging_ini(root_level: str, levels: Sequence[tuple[str, str]] = ()) -> str:
    """``logging.ini``: the root logger on stderr with oslo.log's JSON formatter, one logger per level.

    Loggers are keyed ``level1``, ``level2``, ... (a logger name may hold characters a key may not);
    the name is the ``qualname``, with ``%`` doubled for configparser's interpolation. They have no
    handler of their own and propagate to the root's; handler level NOTSET, so the loggers govern.
    """
    if root_level not in LEVELS:
        raise ValueError(f"logging level {root_level!r} is not one of {', '.join(LEVELS)}")
    keys = [f"level{i}" for i in range(1, len(levels) + 1)]
    lines = ["[loggers]", f"keys = {', '.join(['root', *keys])}", ""]
    lines += ["[handlers]", "keys = stderr", "", "[formatters]", "keys = json", ""]
    lines += ["[logger_root]", f"level = {root_level}", "handlers = stderr", ""]
    for key, (name, level) in zip(keys, levels, strict=True):
        qualname = name.replace("%", "%%")
        lines += [f"[logger_{key}]", f"level = {level}", "handlers =", f"qualname = {qualname}", ""]
    lines += ["[handler_stderr]", "class = StreamHandler", "args = (sys.stderr,)", "level = NOTSET"]
    lines += ["formatter = json", "", "[formatter_json]", "class = oslo_log.formatters.JSONFormatter"]
    return "\n".join(lines) + "\n"
