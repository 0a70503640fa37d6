"""What the fake Keystone and Nova APIs share: microversions, error bodies, the token check."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from simcluster.standins.openstack.cloud import ADMIN_ROLE, JSON, Cloud

MIN_MICROVERSION = (2, 1)
MAX_MICROVERSION = (2, 100)


def mv_str(mv: tuple[int, int]) -> str:
    return f"{mv[0]}.{mv[1]}"


def authorize(cloud: Cloud, request: web.Request, *, admin: bool = False) -> tuple[int, int]:
    """Checks the token (401), the microversion (406) and, if asked, the admin role (403)."""
    token = request.headers.get("X-Auth-Token", "")
    with cloud.lock:
        user = cloud.tokens.get(token)
    if user is None:
        raise nova_error(401, "Unauthorized", "The request you have made requires authentication.")
    mv = requested_microversion(request)
    if mv < MIN_MICROVERSION or mv > MAX_MICROVERSION:
        raise nova_error(
            406,
            "Not Acceptable",
            f"Version {mv_str(mv)} is not supported by the API. Minimum is {mv_str(MIN_MICROVERSION)} "
            f"and maximum is {mv_str(MAX_MICROVERSION)}.",
        )
    if admin and ADMIN_ROLE not in user.roles:
        raise nova_error(
            403, "Forbidden", f"Policy doesn't allow {request.method} {request.path} to be performed."
        )
    return mv


def requested_microversion(request: web.Request) -> tuple[int, int]:
    raw = request.headers.get("OpenStack-API-Version", "")
    value = None
    for part in raw.split(","):
        words = part.strip().split()
        if len(words) == 2 and words[0].lower() == "compute":
            value = words[1]
    value = value or request.headers.get("X-OpenStack-Nova-API-Version")
    if not value:
        return MIN_MICROVERSION
    if value == "latest":
        return MAX_MICROVERSION
    try:
        major, minor = value.split(".")
        return int(major), int(minor)
    except ValueError:
        raise nova_error(400, "Bad Request", f"Invalid API version request string {value}") from None


class ApiFault(Exception):
    """An error answer: raised by handlers, turned into a JSON response by the middleware."""

    def __init__(self, status: int, body: JSON) -> None:
        super().__init__(status)
        self.status = status
        self.body = body

    def response(self) -> web.Response:
        return web.json_response(self.body, status=self.status)


_FAULT_KINDS = {
    400: "badRequest",
    401: "unauthorized",
    403: "forbidden",
    404: "itemNotFound",
    406: "notAcceptable",
    409: "conflictingRequest",
}


def nova_error(status: int, title: str, message: str) -> ApiFault:
    """A Nova-style fault body ({"<kind>": {"code", "message"}})."""
    del title
    return ApiFault(status, {_FAULT_KINDS.get(status, "computeFault"): {"code": status, "message": message}})


def keystone_error(status: int, title: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": status, "title": title, "message": message}}, status=status)


def redact(body: Any) -> Any:
    """A copy of a Keystone request body without passwords and secrets."""
    if isinstance(body, dict):
        return {
            k: "***" if k in ("password", "secret") and isinstance(v, str) else redact(v)
            for k, v in body.items()
        }
    if isinstance(body, list):
        return [redact(v) for v in body]
    return body
