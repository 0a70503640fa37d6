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


# Issue 36 §6: a name holding a character the URL grammar gives a meaning (``?`` starts the query,
# ``#`` the fragment, a tab or space is not allowed at all) must still travel as one path segment.
ESCAPED = (
    ("a?labelSelector=x", "a%3FlabelSelector%3Dx"),
    ("a#frag", "a%23frag"),
    ("a\tb", "a%09b"),
    ("a b", "a%20b"),
    ("\u212aeystone", "%E2%84%AAeystone"),
    ("a;b,c", "a%3Bb%2Cc"),
)


@pytest.mark.parametrize(("value", "segment"), ESCAPED)
def test_a_name_with_url_syntax_is_percent_escaped_into_one_segment(value: str, segment: str) -> None:
    assert SECRETS.path("tenant", value) == f"/api/v1/namespaces/tenant/secrets/{segment}"
    assert SECRETS.path(value) == f"/api/v1/namespaces/{segment}/secrets"
    assert NOVAS.path(value, value, "status") == (
        f"/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/{segment}/novas/{segment}/status"
    )


async def test_the_api_server_receives_a_name_with_a_question_mark_as_one_segment() -> None:
    """A real ApiClient against a local HTTP server: what arrives is the escaped path, no query."""
    from aiohttp import web
    from kubernetes_asyncio import client as k8s_client

    from nova_operator.kube.config import api_client

    seen: list[tuple[str, str, dict[str, str]]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.raw_path, request.path, dict(request.query)))
        return web.json_response({"kind": "Secret", "metadata": {"name": request.match_info["name"]}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{ns}/secrets/{name}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    cfg = k8s_client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    kube = Kube(api_client(cfg))
    try:
        for name in ("a?labelSelector=x", "a#b", "a\tb"):
            seen.clear()
            got = await kube.get(SECRETS, name, "tenant")
            assert got["metadata"]["name"] == name  # the server routed it as one segment, decoded
            ((raw, decoded, query),) = seen
            assert decoded == f"/api/v1/namespaces/tenant/secrets/{name}"
            assert query == {}
            # on the wire the characters with a URL meaning arrive escaped
            assert raw.startswith("/api/v1/namespaces/tenant/secrets/a%")
            assert not {"?", "#", "\t"} & set(raw)
    finally:
        await kube.close()
        await runner.cleanup()
