"""Under ``logging.format: json`` the real oslo.log of each release honours ``debug`` and
``perLoggerLevels`` and keeps its per-library defaults (issue 24, item 8).

Each test runs a release's nova venv (``tools/catalogs/ensure_venvs.sh`` makes them; CI runs it
before the tests; here they are only read) in a subprocess, the way a nova process starts: nova's
``config.parse_args`` over a config directory holding the rendered ``nova.conf`` and
``logging.ini`` (the ``log_config_append`` path pointed at it), then ``oslo_log.log.setup(CONF,
'nova')``, then records at every level on a few loggers. A missing venv fails, never skips.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nova_operator import catalog
from nova_operator.renderers import logging_conf, novaconf
from nova_operator.renderers.novaconf import ConfInputs

CATALOG_TOOLS = Path(__file__).resolve().parents[3] / "tools" / "catalogs"
LOGGERS = ("nova.api", "nova.quiet", "sqlalchemy", "amqp", "keystonemiddleware")
IMPORT_WARNINGS = {"EventletDeprecationWarning"}
"""Python warnings a release prints while nova is imported, before oslo.log is set up: plain text on
stderr, not records, whatever the logging config (2026.2's eventlet warns that it is deprecated).
The probe collects them apart; every line written after that must be a JSON record."""
PROBE = """\
import json, sys, warnings

with warnings.catch_warnings(record=True) as early:  # printed to stderr before logging is set up
    import nova.conf
    from nova import config
    from oslo_log import _options, log

CONF = nova.conf.CONF
config.parse_args(["nova-probe", "--config-dir", sys.argv[1]], configure_db=False, init_rpc=False)
found = {"oslo": _options.DEFAULT_LOG_LEVELS, "nova": CONF.default_log_levels}
print(json.dumps({**found, "early": sorted({w.category.__name__ for w in early})}))
sys.stdout.flush()
log.setup(CONF, "nova")
for name in sys.argv[2:]:
    logger = log.getLogger(name)
    for level in ("debug", "info", "warning"):
        getattr(logger, level)("%s from %s", level, name)
"""


def _venv(release: str) -> Path:
    spec = importlib.util.spec_from_file_location("catalogs_generate", CATALOG_TOOLS / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    python = generate.venv_dir(release) / "bin" / "python"
    assert python.is_file(), f"{python} is missing: tools/catalogs/ensure_venvs.sh makes it"
    return python  # type: ignore[no-any-return]


def _inputs(**changes: Any) -> ConfInputs:
    inputs = ConfInputs(name="nova", namespace="openstack", keystone_endpoint="http://ks:5000/v3")
    return dataclasses.replace(inputs, log_format="json", **changes)


def _run(release: str, tmp_path: Path, nova_conf: str, logging_ini: str) -> tuple[dict[str, Any], list[Any]]:
    """Start the probe on the files; (the defaults it reports, the records it wrote to stderr)."""
    conf_dir = tmp_path / "nova.conf.d"
    conf_dir.mkdir(parents=True)
    (conf_dir / "logging.ini").write_text(logging_ini)
    assert novaconf.LOGGING_INI_PATH in nova_conf
    (conf_dir / "nova.conf").write_text(
        nova_conf.replace(novaconf.LOGGING_INI_PATH, str(conf_dir / "logging.ini"))
    )
    (tmp_path / "probe.py").write_text(PROBE)
    done = subprocess.run(
        [str(_venv(release)), str(tmp_path / "probe.py"), str(conf_dir), *LOGGERS],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            pytest.fail(f"{release}: a line that is not a JSON record: {line!r}\n{done.stderr[-3000:]}")
    found = json.loads(done.stdout.splitlines()[0])
    assert set(found["early"]) <= IMPORT_WARNINGS, release
    return found, records


def _said(records: list[Any]) -> set[str]:
    return {str(r["message"]) for r in records}


PER_LOGGER = {"nova.quiet": "WARNING", "sqlalchemy": "INFO"}


@pytest.mark.parametrize("release", catalog.supported_releases())
def test_json_records_debug_and_per_logger_levels_take_effect_in_the_real_oslo_log(
    release: str, tmp_path: Path
) -> None:
    for debug in (False, True):
        data = novaconf.config_data(_inputs(debug=debug, per_logger_levels=PER_LOGGER))
        _, records = _run(release, tmp_path / str(debug), data["nova.conf"], data["logging.ini"])
        said = _said(records)
        assert all(r["levelname"] in ("DEBUG", "INFO", "WARNING") for r in records)
        assert {"info from nova.api", "warning from nova.quiet", "warning from amqp"} <= said
        assert ("debug from nova.api" in said) is debug  # the root: DEBUG only under debug
        assert "info from nova.quiet" not in said  # perLoggerLevels: nova.quiet=WARNING
        assert "info from sqlalchemy" in said  # perLoggerLevels over oslo.log's sqlalchemy=WARN
        assert "debug from sqlalchemy" not in said
        assert "info from amqp" not in said  # oslo.log's default amqp=WARN kept
        assert "info from keystonemiddleware" not in said  # and keystonemiddleware=WARN
        by_message = {r["message"]: r for r in records}
        assert by_message["info from nova.api"]["name"] == "nova.api"


def test_the_check_can_fail_oslo_log_ignores_nova_conf_once_a_logging_file_is_set(tmp_path: Path) -> None:
    """The former logging.ini (a root level only) with ``debug = true`` and ``default_log_levels`` in
    nova.conf: oslo.log honours neither, which is what the test above would catch."""
    data = novaconf.config_data(_inputs(debug=True, per_logger_levels=PER_LOGGER))
    assert "debug = true" in data["nova.conf"]
    assert "default_log_levels = " in data["nova.conf"]
    _, records = _run("2026.1", tmp_path, data["nova.conf"], logging_conf.logging_ini("INFO"))
    said = _said(records)
    assert "debug from nova.api" not in said
    assert "info from nova.quiet" in said
    assert "info from amqp" in said


def test_the_rendered_defaults_are_oslo_logs_and_novas_of_every_release(tmp_path: Path) -> None:
    rendered = [f"{name}={level}" for name, level in logging_conf.log_levels({})]
    union: set[str] = set()
    for release in catalog.supported_releases():
        data = novaconf.config_data(_inputs())
        defaults, _ = _run(release, tmp_path / release, data["nova.conf"], data["logging.ini"])
        assert [p for p in rendered if p in defaults["nova"]] == defaults["nova"], release  # same order
        assert set(defaults["oslo"]) <= set(defaults["nova"]), release
        union |= set(defaults["nova"])
    assert set(rendered) == union
