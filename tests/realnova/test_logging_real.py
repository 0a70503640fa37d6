"""Issue 24 item 8 on the real processes: under ``logging.format: json`` each role of the Nova writes
JSON records, and ``debug`` and ``perLoggerLevels`` take effect (oslo.log reads neither once
``log_config_append`` names a file: the rendered ``logging.ini`` carries both).

What is not a record, by design (docs/operations.md, "Logs"): what a process prints before oslo.log
is set up (nova's import-time warning, through Python's last-resort handler) and uWSGI's own
start-up lines. So a bus role's or the console proxy's log is all records from its first record on,
and an API pod's lines written once it serves (its requests, uWSGI's request lines among them) are
all records.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from simcluster import SimHandle

from tests.realnova.realcluster import GROUP, NAMESPACE, NOVA, OpenStackClient, compute_url, pods, wait_for
from tests.realnova.rollouts import CRONJOB, DEPLOYMENTS, changed, pod_names, templates, wait_rolled

pytestmark = pytest.mark.realnova

NOVA_PATH = f"{GROUP}/namespaces/{NAMESPACE}/novas/{NOVA}"
UWSGI_ROLES = ("api", "metadata")
OTHER_ROLES = ("scheduler", "conductor", "novncproxy")
SETTLE = 15  # seconds of probes and periodic tasks a window of steady output spans

Record = dict[str, Any]


def _roll(handle: SimHandle, logging: dict[str, Any], *, pool: bool) -> dict[str, set[str]]:
    """Sets ``spec.logging`` (a merge patch: ``None`` values drop keys) and waits until the five
    Deployments, and the pool if ``pool`` (the compute contract carries ``debug``, nothing else of
    the logging), run new pods only, all Ready; the live pods then. What else rolls fails it."""
    before_pods, before = pod_names(handle), templates(handle)
    handle.cluster.kube.patch(NOVA_PATH, {"spec": {"logging": logging}})
    pool_key = {k for k in before if k.startswith("daemonset/")} if pool else set()
    wait_for(
        lambda: set(DEPLOYMENTS) | pool_key <= changed(before, templates(handle)) or None,
        within=180,  # the pool's follows the contract Secret: a Nova pass, then a pool pass (slow under load)
        what=f"the pod templates of {sorted(set(DEPLOYMENTS) | pool_key)} changed",
        handle=handle,
    )
    rolled = set(DEPLOYMENTS) | ({"pool"} if pool else set())
    after = wait_rolled(handle, before_pods, rolled, within=300)
    # the db-archive CronJob's template mounts the same ConfigMap (its runs read logging.ini too)
    assert changed(before, templates(handle)) == {*DEPLOYMENTS, CRONJOB, *pool_key}
    return after


def _lines(handle: SimHandle, role: str) -> dict[str, list[str]]:
    """Each live pod of ``role``: its container's log lines (``RealTier.container_log``)."""
    assert handle.real is not None
    selector = f"app.kubernetes.io/instance={NOVA},app.kubernetes.io/component={role}"
    out: dict[str, list[str]] = {}
    for pod in pods(handle, selector=selector):
        if pod["metadata"].get("deletionTimestamp"):
            continue
        (container,) = pod["spec"]["containers"]
        out[pod["metadata"]["name"]] = handle.real.container_log(pod, container["name"]).splitlines()
    return out


def _record(line: str) -> Record | None:
    """The JSON record of oslo.log's JSONFormatter (or uWSGI's request encoder) a line holds."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or not {"name", "levelname", "message"} <= set(record):
        return None
    return record


def _records(logs: dict[str, list[str]]) -> list[Record]:
    return [r for lines in logs.values() for r in map(_record, lines) if r is not None]


def _all_records_from_the_first(logs: dict[str, list[str]], role: str) -> None:
    for pod, lines in logs.items():
        first = next((i for i, ln in enumerate(lines) if _record(ln) is not None), None)
        assert first is not None, (role, pod, lines[-20:])
        plain = [ln for ln in lines[first:] if _record(ln) is None]
        assert plain == [], (role, pod, plain[:10])


def _window(
    handle: SimHandle, roles: Iterable[str], traffic: Callable[[], object]
) -> dict[str, dict[str, list[str]]]:
    """The lines each pod of ``roles`` writes while ``traffic`` runs and for SETTLE seconds after."""
    marks = {role: {pod: len(lines) for pod, lines in _lines(handle, role).items()} for role in roles}
    traffic()
    time.sleep(SETTLE)
    return {
        role: {pod: lines[marks[role].get(pod, 0) :] for pod, lines in _lines(handle, role).items()}
        for role in roles
    }


def _levels(records: Iterable[Record], level: str) -> set[str]:
    return {r["name"] for r in records if r["levelname"] == level}


def _check_json(handle: SimHandle, client: OpenStackClient) -> dict[str, list[Record]]:
    """Every role's output is records (as the module says); each role's records, by role."""
    by_role: dict[str, list[Record]] = {}
    for role in OTHER_ROLES:
        logs = _lines(handle, role)
        _all_records_from_the_first(logs, role)
        by_role[role] = _records(logs)
    window = _window(handle, UWSGI_ROLES, lambda: [client.services() for _ in range(3)])
    for role in UWSGI_ROLES:
        for pod, lines in window[role].items():
            assert lines, (role, pod)  # the kubelet's probes alone write request lines
            plain = [ln for ln in lines if _record(ln) is None]
            assert plain == [], (role, pod, plain[:10])
            assert any(r["name"] == "uwsgi.request" for r in map(_record, lines) if r), (role, pod)
        by_role[role] = _records(_lines(handle, role))
    requests = [r for r in by_role["api"] if r["name"] == "nova.api.openstack.requestlog"]
    assert any("/os-services" in r["message"] for r in requests), requests[-5:]
    return by_role


def test_json_records_from_every_role_and_debug_and_per_logger_levels_take_effect(
    minimal: SimHandle,
) -> None:
    handle = minimal
    kube = handle.cluster.kube
    client = OpenStackClient(handle, compute_url(handle, NOVA))
    original = kube.get(NOVA_PATH)["spec"].get("logging") or {}
    original_debug = bool(original.get("debug"))
    try:
        # debug on: the root at DEBUG, every role's debug lines (the pool rolls: the contract carries it)
        _roll(handle, {"format": "json", "debug": True, "perLoggerLevels": None}, pool=not original_debug)
        loud = _check_json(handle, client)
        for role, records in loud.items():
            assert _levels(records, "DEBUG") - {"nova.service"}, role
        assert any("nova.utils" in _levels(r, "INFO") for r in loud.values())  # its default level
        print(
            "logging, json: debug loggers per role "
            f"{ {role: len(_levels(r, 'DEBUG')) for role, r in loud.items()} }"
        )

        # debug off again, one logger down to DEBUG, another up to WARNING, the root at INFO
        levels = {"nova.service": "DEBUG", "nova.utils": "WARNING"}
        _roll(handle, {"format": "json", "debug": False, "perLoggerLevels": levels}, pool=True)
        quiet = _check_json(handle, client)
        for role in ("scheduler", "conductor"):  # they log their RPC server's start at DEBUG
            assert _levels(quiet[role], "DEBUG") == {"nova.service"}, (role, _levels(quiet[role], "DEBUG"))
        for role, records in quiet.items():
            assert _levels(records, "DEBUG") <= {"nova.service"}, role  # no other logger's debug line
            assert "nova.utils" not in _levels(records, "INFO"), role  # raised to WARNING
    finally:
        # The Nova stays at json with the two levels when debug is back where it was: no later module
        # depends on the format of the logs, and a third rollout of every role costs a minute of CI.
        # Otherwise (a failure on the way, or a sample that had debug on) its logging is put back.
        now = kube.get(NOVA_PATH)["spec"].get("logging") or {}
        if bool(now.get("debug")) != original_debug:
            reset = {k: None for k in ("format", "level", "debug", "perLoggerLevels")}
            _roll(handle, {**reset, **original}, pool=True)
