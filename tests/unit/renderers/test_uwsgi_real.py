"""The rendered uWSGI command lines start the real uWSGI of each release's nova venv, and serve.

The image carries uWSGI 2.0 (the image contract); the catalog venvs of
``tools/catalogs/ensure_venvs.sh`` install the same version, so each test here runs the real
binary with the API and metadata command lines rendered from ``config/samples/nova_full.yaml``
(every uWSGI option set). Only the app is swapped for a tiny WSGI module and the bind address for
a free loopback port: every other flag is passed as rendered. A missing venv or binary fails.
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import yaml

from nova_operator import catalog
from nova_operator.models.nova import Nova
from nova_operator.naming import Component
from nova_operator.renderers import workload

REPO = Path(__file__).resolve().parents[3]
INPUTS = workload.WorkloadInputs(config_map="nova-config-0123abcd", broker_port=5672)
TINY_APP = """\
import json, sys
def application(environ, start_response):
    sys.stderr.write(json.dumps({"name": "tinyapp", "message": environ["PATH_INFO"]}) + "\\n")
    sys.stderr.flush()
    body = b"served " + environ["PATH_INFO"].encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
"""


def _full_sample() -> Nova:
    return Nova.model_validate(yaml.safe_load((REPO / "config/samples/nova_full.yaml").read_text()))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _runnable(command: list[str], uwsgi: Path, app_dir: Path, port: int) -> list[str]:
    """The rendered command with the tiny app instead of nova's and a loopback port."""
    args = list(command)
    assert args[0] == "uwsgi"
    args[0] = str(uwsgi)
    args[args.index("--module") + 1] = "tinyapp:application"
    args[args.index("--http") + 1] = f"127.0.0.1:{port}"
    return [*args, "--pythonpath", str(app_dir)]


@contextmanager
def _running(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # --die-on-term: the master stops its workers
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _serve(proc: subprocess.Popen[bytes], port: int, log: Path) -> list[bytes]:
    """Two requests on one kept-alive connection, once uWSGI listens; fails if uWSGI exits first."""
    for _ in range(600):
        if proc.poll() is not None:
            pytest.fail(f"uwsgi exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/one")
            first = conn.getresponse()
            bodies = [first.read()]
            conn.request("GET", "/two")
            bodies.append(conn.getresponse().read())
            conn.close()
            return bodies
        except (ConnectionRefusedError, ConnectionResetError, http.client.RemoteDisconnected):
            _pause(proc)
    pytest.fail(f"uwsgi never served on port {port}:\n{log.read_text(errors='replace')[-3000:]}")


PATHS = ("/one", "/two", '/three"quoted\\', "/four")


def _records(log: Path, *, strict: bool = True) -> list[dict[str, Any]]:
    """The log's JSON records; not ``strict``: a line that does not parse (still being written) is
    left out rather than failing."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                if strict:
                    raise
    return out


def _served(records: list[dict[str, Any]], path: str) -> bool:
    """uWSGI's request line for ``path`` is among ``records``."""
    return any(
        r.get("name") == "uwsgi.request" and f"GET {path} => generated" in r.get("message", "")
        for r in records
    )


def _await_log(proc: subprocess.Popen[bytes], done: Callable[[], bool]) -> None:
    """Until ``done()`` (at most 60 s, or until uWSGI exits); the asserts say the rest."""
    for _ in range(600):
        if done() or proc.poll() is not None:
            return
        _pause(proc)


def _pause(proc: subprocess.Popen[bytes]) -> None:
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=0.1)


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    (tmp_path / "tinyapp.py").write_text(TINY_APP)
    return tmp_path


def _uwsgi(venvs: dict[str, Path], release: str) -> Path:
    binary = venvs[release] / "bin" / "uwsgi"
    assert binary.is_file(), f"{binary} is missing: tools/catalogs/ensure_venvs.sh installs uWSGI"
    return binary


@pytest.mark.parametrize("component", [Component.API, Component.METADATA], ids=str)
@pytest.mark.parametrize("release", catalog.supported_releases())
def test_the_rendered_uwsgi_command_serves_on_the_real_uwsgi(
    release: str, component: Component, venvs: dict[str, Path], app_dir: Path, tmp_path: Path
) -> None:
    nova = _full_sample()
    command = workload.deployment(nova, component, INPUTS)["spec"]["template"]["spec"]["containers"][0][
        "command"
    ]
    if component is Component.API:  # the sample sets every option of the API's block
        assert nova.spec.api.uwsgi.http_keep_alive_timeout is not None
    port = _free_port()
    log = tmp_path / "uwsgi.log"
    with _running(_runnable(command, _uwsgi(venvs, release), app_dir, port), log) as proc:
        assert _serve(proc, port, log) == [b"served /one", b"served /two"]
    assert "unrecognized option" not in log.read_text(errors="replace")
    if component is Component.API:
        assert f"--http-keepalive={nova.spec.api.uwsgi.http_keep_alive_timeout}" in command


@pytest.mark.parametrize("component", [Component.API, Component.METADATA], ids=str)
def test_under_json_logging_uwsgis_request_lines_are_json_records_and_the_apps_stay_its_own(
    component: Component, venvs: dict[str, Path], app_dir: Path, tmp_path: Path
) -> None:
    nova = _full_sample()
    assert nova.spec.logging.format == "json"
    command = workload.deployment(nova, component, INPUTS)["spec"]["template"]["spec"]["containers"][0][
        "command"
    ]
    port = _free_port()
    log = tmp_path / "uwsgi.log"
    with _running(_runnable(command, _uwsgi(venvs, "2026.1"), app_dir, port), log) as proc:
        _serve(proc, port, log)
        for path in ('/three"quoted\\', "/four"):  # a quote and a backslash stay valid JSON
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", path)
            conn.getresponse().read()
            conn.close()
        # each worker writes its request line after the response went out: a SIGTERM that comes
        # first (a busy machine) loses the line, which is the test's race, not uWSGI's behaviour
        _await_log(proc, lambda: all(_served(_records(log, strict=False), path) for path in PATHS))
    records = _records(log)
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("{"):  # no plain request line: uWSGI's own start and stop lines only
            assert "=> generated" not in line, line
    requests = [r for r in records if r.get("name") == "uwsgi.request"]
    assert all(r["levelname"] == "INFO" for r in requests)
    for path in PATHS:
        assert _served(records, path), (path, [r["message"] for r in requests])
    # what the app writes to its stderr (nova's own JSON records) is not wrapped into uWSGI's
    app = [r["message"] for r in records if r.get("name") == "tinyapp"]
    assert app == ["/one", "/two", '/three"quoted\\', "/four"], records


def test_the_real_uwsgi_refuses_the_flag_the_renderer_used_to_emit(
    venvs: dict[str, Path], app_dir: Path, tmp_path: Path
) -> None:
    """The check above can fail: uWSGI 2.0 exits on an option it does not have."""
    nova = _full_sample()
    command = workload.deployment(nova, Component.API, INPUTS)["spec"]["template"]["spec"]["containers"][0][
        "command"
    ]
    args = [
        *_runnable(command, _uwsgi(venvs, "2026.1"), app_dir, _free_port()),
        "--http-keepalive-timeout",
        "30",
    ]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    assert "unrecognized option '--http-keepalive-timeout'" in result.stderr + result.stdout
