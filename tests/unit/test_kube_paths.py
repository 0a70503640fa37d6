"""Issue 13 item 1, second layer: the one seam that builds request paths refuses a bad segment.

Whatever field a name comes from, ``ResourceRef.path`` (and so every ``Kube`` verb) refuses an
empty name, ``.``, ``..`` and anything holding ``/`` or ``%`` before a request is sent.
"""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator.kube import Kube
from nova_operator.kube.paths import InvalidPathSegment, check_segment
from nova_operator.kube.resources import NOVAS, RABBITMQ_CLUSTERS, SECRETS

BAD = (
    "",
    ".",
    "..",
    "../../victim-ns/rabbitmqclusters/prod-rabbit",
    "../../../../../../api/v1/namespaces/kube-system/secrets/x",
    "a/b",
    "%2e%2e",
    "a%2Fb",
    "/",
)


@pytest.mark.parametrize("value", BAD)
def test_a_bad_segment_is_refused_as_name_namespace_and_subresource(value: str) -> None:
    with pytest.raises(InvalidPathSegment):
        check_segment(value)
    with pytest.raises(InvalidPathSegment):
        SECRETS.path("tenant", value)
    if value:  # an empty namespace means "all namespaces" on a list, by design
        with pytest.raises(InvalidPathSegment):
            SECRETS.path(value, "x")
    with pytest.raises(InvalidPathSegment):
        NOVAS.path("tenant", "nova", value or ".")


@pytest.mark.parametrize("value", ["nova", "a.b-c", "x" * 253, "..a", "a..b", "UPPER"])
def test_a_plain_segment_passes_unchanged(value: str) -> None:
    # the seam checks path safety only; the name grammar is the models' and the API server's job
    assert check_segment(value) == value
    assert SECRETS.path("tenant", value) == f"/api/v1/namespaces/tenant/secrets/{value}"


class _Recording:
    """An ApiClient stand-in that records what would have been sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.configuration = type("C", (), {"host": "https://127.0.0.1:1"})()

    async def call_api(self, path: str, method: str, **_: Any) -> Any:
        self.sent.append(f"{method} {path}")
        raise AssertionError(f"a request was sent: {method} {path}")

    async def close(self) -> None:
        return None


async def test_no_verb_of_the_client_sends_a_request_for_a_traversing_name() -> None:
    api = _Recording()
    kube = Kube(api)  # type: ignore[arg-type]
    bad = "../../victim-ns/secrets/prod"
    body = {"metadata": {"name": bad}}
    calls = [
        kube.get(RABBITMQ_CLUSTERS, bad, "tenant"),
        kube.get(SECRETS, "x", bad),
        kube.delete(SECRETS, bad, "tenant"),
        kube.patch(NOVAS, bad, {}, "tenant"),
        kube.patch_status(NOVAS, bad, {}, "tenant"),
        kube.apply(SECRETS, body, field_manager="t", namespace="tenant"),
        kube.replace(SECRETS, body, "tenant"),
        kube.create(SECRETS, body, bad),
        kube.list(SECRETS, bad),
    ]
    for call in calls:
        with pytest.raises(InvalidPathSegment):
            await call
    with pytest.raises(InvalidPathSegment):
        kube.watch(SECRETS, bad, resource_version="1")
    assert api.sent == []
