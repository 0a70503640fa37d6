"""The reference ``nova-amqp-ready`` the image contract names, against real sockets on loopback.

Spec: ready while a process of the container (its PID namespace) holds an ESTABLISHED socket to
the broker port of ``$NOVA_AMQP_PORT``. Here the test process plays the service: it holds the
client end of a loopback connection to a listening "broker".
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from nova_operator import image_contract
from nova_operator.models.nova import Nova
from nova_operator.naming import Component
from nova_operator.renderers import workload

SCRIPT = image_contract.AMQP_READY_SOURCE
REPO = Path(__file__).resolve().parents[2]


def _probe(port: int | str, *, wrap: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NOVA_AMQP_PORT": str(port)}
    return subprocess.run(
        [*wrap, sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False
    )


@contextmanager
def _broker(family: socket.AddressFamily = socket.AF_INET) -> Iterator[tuple[socket.socket, int]]:
    host = "::1" if family == socket.AF_INET6 else "127.0.0.1"
    with socket.socket(family, socket.SOCK_STREAM) as listener:
        listener.bind((host, 0))
        listener.listen()
        yield listener, int(listener.getsockname()[1])


@contextmanager
def _connected(listener: socket.socket, port: int) -> Iterator[socket.socket]:
    host = "::1" if listener.family == socket.AF_INET6 else "127.0.0.1"
    client = socket.create_connection((host, port))
    server_side, _ = listener.accept()
    try:
        yield client
    finally:
        client.close()
        server_side.close()


def test_the_contract_names_the_script_and_the_probe_calls_it_by_that_path() -> None:
    assert SCRIPT.is_file()
    assert os.access(SCRIPT, os.X_OK)
    assert image_contract.NOVA_AMQP_READY.startswith("/")
    sample = yaml.safe_load((REPO / "config/samples/nova_minimal.yaml").read_text())
    for component in (Component.SCHEDULER, Component.CONDUCTOR):
        deployment = workload.deployment(
            Nova.model_validate(sample), component, workload.WorkloadInputs(config_map="c", broker_port=5672)
        )
        probe = deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
        assert probe["exec"]["command"] == [image_contract.NOVA_AMQP_READY]


@pytest.mark.parametrize("family", [socket.AF_INET, socket.AF_INET6], ids=["ipv4", "ipv6"])
def test_ready_while_a_process_holds_an_established_connection_to_the_port(
    family: socket.AddressFamily,
) -> None:
    with _broker(family) as (listener, port):
        not_yet = _probe(port)
        assert not_yet.returncode == 1, not_yet.stdout  # listening is not connected
        assert "no established connection" in not_yet.stdout
        with _connected(listener, port):
            ready = _probe(port)
            assert ready.returncode == 0, ready.stdout + ready.stderr
            assert f"pid {os.getpid()} is connected to port {port}" in ready.stdout
        gone = _probe(port)
        assert gone.returncode == 1, gone.stdout


def test_a_connection_to_another_port_does_not_count() -> None:
    with _broker() as (listener, port), _broker() as (_, other), _connected(listener, port):
        result = _probe(other)
    assert result.returncode == 1, result.stdout


def test_a_connection_held_outside_the_pid_namespace_does_not_count() -> None:
    """In a PID namespace of its own (as in a container), the test process is not visible."""
    with _broker() as (listener, port), _connected(listener, port):
        assert _probe(port).returncode == 0
        isolated = _probe(port, wrap=("unshare", "--pid", "--fork", "--mount-proc"))
    assert isolated.returncode == 1, isolated.stdout + isolated.stderr
    assert "no process of this container holds a connection" in isolated.stdout


@pytest.mark.parametrize("port", ["", "amqp", "0", "70000"])
def test_a_missing_or_bad_port_is_not_ready_and_says_why(port: str) -> None:
    result = _probe(port)
    assert result.returncode == 1
    assert "NOVA_AMQP_PORT is not a port number" in result.stdout
