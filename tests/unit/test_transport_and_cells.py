from __future__ import annotations

import pytest

from nova_operator.decisions.cells import parse_cells_report, report_pod, termination_message
from nova_operator.renderers.secrets import TransportURLRejected, check_transport_url

SECRET = "s3cr3t-Pa55"
U0 = "00000000-0000-0000-0000-000000000000"
U1 = "4f2c7e9a-1b3d-4c5e-8f9a-0b1c2d3e4f5a"


@pytest.mark.parametrize(
    ("url", "port"),
    [
        (f"rabbit://nova:{SECRET}@rabbitmq.openstack.svc:5672/", 5672),
        (f"rabbit://nova:{SECRET}@h1:5671,nova:{SECRET}@h2:5671/vhost?ssl=1", 5671),
        (f"rabbit://nova:{SECRET}@h1,nova:{SECRET}@h2:5672/", 5672),  # only the last host counts
    ],
)
def test_accepted_transport_urls_yield_the_broker_port(url: str, port: int) -> None:
    assert check_transport_url(url) == port


@pytest.mark.parametrize(
    ("url", "words"),
    [
        (f"rabbit://nova:{SECRET}@rabbitmq.openstack.svc/", "no explicit port"),
        (f"rabbit://nova:{SECRET}@h1:5672,nova:{SECRET}@h2/", "no explicit port"),
        (f"rabbit://nova:{SECRET}@[fd00::1]:5672/", "IPv6 literal"),
        (f"http://nova:{SECRET}@h:5672/", "must be rabbit, not 'http'"),
        (f"rabbit://nova:{SECRET}@h:99999/", "no explicit port"),
        ("rabbit:///", "no host"),
        # issue 13 item 8: no scheme, so what precedes "://" is user and password
        (f"nova:{SECRET}@h:5672/?next=rabbit://x", "an unknown scheme"),
        (f"{SECRET}://h:5672/", "an unknown scheme"),
        (f"nova:{SECRET}@h:5672/", "no scheme"),
    ],
)
def test_rejected_transport_urls_say_why_without_any_part_of_the_credential(url: str, words: str) -> None:
    with pytest.raises(TransportURLRejected) as rejected:
        check_transport_url(url)
    assert words in str(rejected.value)
    assert SECRET not in str(rejected.value)
    assert "nova" not in str(rejected.value)


def test_cells_report_keeps_valid_lines_in_order() -> None:
    message = f"cell0={U0}\ncell1={U1}\n"
    assert parse_cells_report(message) == [{"name": "cell0", "uuid": U0}, {"name": "cell1", "uuid": U1}]


@pytest.mark.parametrize(
    "message", [None, "", "Traceback (most recent call last):", f"cell 1={U1}", "cell1=not-a-uuid"]
)
def test_cells_report_without_a_valid_line_is_empty(message: str | None) -> None:
    assert parse_cells_report(message) == []


def test_cells_report_skips_garbage_between_valid_lines() -> None:
    assert parse_cells_report(f"warning: x\ncell1={U1}\r\n") == [{"name": "cell1", "uuid": U1}]


def _pod(phase: str, created: str, state: dict[str, object] | None = None) -> dict[str, object]:
    status: dict[str, object] = {"phase": phase}
    if state is not None:
        status["containerStatuses"] = [state]
    return {"metadata": {"creationTimestamp": created}, "status": status}


def test_report_pod_prefers_succeeded_then_newest() -> None:
    failed_old = _pod("Failed", "2026-11-29T10:00:00Z")
    failed_new = _pod("Failed", "2026-11-29T10:05:00Z")
    ok = _pod("Succeeded", "2026-11-29T10:01:00Z")
    assert report_pod([failed_old, ok, failed_new]) is ok
    assert report_pod([failed_old, failed_new]) is failed_new
    assert report_pod([]) is None


def test_termination_message_falls_back_to_last_state() -> None:
    current = {"state": {"terminated": {"message": "cell0=x"}}}
    previous = {"state": {"running": {}}, "lastState": {"terminated": {"message": "cell1=y"}}}
    assert termination_message(_pod("Succeeded", "t", current)) == "cell0=x"
    assert termination_message(_pod("Running", "t", previous)) == "cell1=y"
    assert termination_message(_pod("Pending", "t")) is None
