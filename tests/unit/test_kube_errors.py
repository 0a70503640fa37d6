"""API failures map to a small exception tree by HTTP status."""

from __future__ import annotations

import json

import pytest

from nova_operator.kube import errors


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (404, errors.NotFound),
        (409, errors.Conflict),
        (410, errors.Gone),
        (422, errors.Invalid),
        (403, errors.Forbidden),
        (429, errors.TooManyRequests),
        (500, errors.KubeError),
    ],
)
def test_status_codes_map_to_exception_classes(status: int, cls: type[errors.KubeError]) -> None:
    body = json.dumps({"kind": "Status", "reason": "SomeReason", "message": "it broke", "code": status})
    exc = errors.from_status(status, body.encode())
    assert type(exc) is cls
    assert (exc.status, exc.reason, str(exc)) == (status, "SomeReason", "it broke")


def test_a_non_json_body_becomes_the_message() -> None:
    exc = errors.from_status(502, b"bad gateway")
    assert (exc.status, str(exc)) == (502, "bad gateway")
    assert str(errors.from_status(503, None)) == "HTTP 503"


def test_a_watch_error_event_status_object_is_accepted() -> None:
    exc = errors.from_status(
        410, {"code": 410, "reason": "Expired", "message": "too old resource version: 1 (5)"}
    )
    assert isinstance(exc, errors.Gone)
    assert exc.reason == "Expired"
