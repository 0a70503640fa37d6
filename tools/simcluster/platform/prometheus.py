"""prometheus and promtool, built from the Go module proxy by ``tools/prometheus/build.sh`` (cached).

``promtool(*args)`` runs promtool and returns its stdout (``ToolError`` with its output on
failure). ``Prometheus`` is a server on 127.0.0.1 with one static scrape job, for the e2e tier:
``query(expr)`` asks its HTTP API and raises ``PromQLError`` when the API answers with an error.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

import yaml

from simcluster.platform.controlplane import REPO, free_port
from simcluster.platform.installtools import ToolError
from simcluster.platform.process import spawn, wait_until


@functools.cache
def bindir() -> pathlib.Path:
    env = os.environ.get("PROMETHEUS_BIN")
    if env:
        return pathlib.Path(env)
    out = subprocess.run(
        ["bash", str(REPO / "tools" / "prometheus" / "build.sh")],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return pathlib.Path(out.stdout.strip().splitlines()[-1])


def promtool(*args: str, cwd: pathlib.Path | None = None, timeout: float = 120) -> str:
    argv = [str(bindir() / "promtool"), *args]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=timeout, check=False)
    if done.returncode != 0:
        raise ToolError(argv, done.returncode, done.stdout + done.stderr)
    return done.stdout


class PromQLError(RuntimeError):
    pass


class Prometheus:
    """One Prometheus server scraping ``targets`` (``host:port``) as job ``job`` with ``labels``
    on each target (what a ServiceMonitor's target labels would be), every ``interval``."""

    def __init__(
        self,
        workdir: pathlib.Path,
        job: str,
        targets: list[str],
        *,
        labels: Mapping[str, str] | None = None,
        interval: str = "1s",
    ) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [
                {
                    "job_name": job,
                    "honor_labels": False,  # as the prometheus-operator renders a ServiceMonitor
                    "static_configs": [{"targets": targets, "labels": dict(labels or {})}],
                }
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        promtool("check", "config", str(workdir / "prometheus.yml"))
        self._proc = spawn(
            "prometheus",
            [
                str(bindir() / "prometheus"),
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h",
                "--log.level=warn",
            ],
            workdir,
        )
        wait_until(self._ready, self._proc, what="prometheus", timeout=30, error=RuntimeError)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def log(self) -> str:
        return self._proc.output(4000)

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:  # 400/422: a bad query; the body says why
            body = json.loads(exc.read() or b"{}")
        if body.get("status") != "success":
            raise PromQLError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` now: ``[{"metric": labels, "value": [t, "v"]}, ...]``."""
        data = self.api("query", query=expr)
        if data["resultType"] != "vector":
            raise PromQLError(f"{expr}: a {data['resultType']}, not a vector")
        return list(data["result"])

    def targets(self) -> list[dict[str, Any]]:
        return list(self.api("targets")["activeTargets"])

    def stop(self) -> None:
        self._proc.stop()
