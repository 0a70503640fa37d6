"""The compute API client: the calls of novacompute-crd.md §14, and the service list and delete of the
Nova's ServiceRecords step; nothing else.

No method enables a service, adds or removes an aggregate host, or starts a migration:
the API this module offers cannot express any of them.

Every request goes through ``openstack.http``: a total deadline per request (the token request
too), a body cap per call, no redirect followed, no remote text in an error. The calls run on the
event loop (aiohttp), so cancelling a pass really ends its calls: nothing is sent after.

Trust: ``Credentials.ca_bundle`` (the Nova's ``spec.tls`` bundle) verifies both Keystone and the
compute API when set, the system's CAs otherwise; a certificate that does not verify is
``<METHOD> <path>: the certificate of <host> is not trusted (...)``, the host being the one the
operator dialled (from the CR or its own settings), never one an answer named.

Every failure is a ``ComputeAPIError`` in fixed words: an answer that is JSON but not in the
documented shape (a field missing, a list where an object belongs, an id that is no number) is
``<METHOD> <path>: answer is not in the documented shape``, never a ``TypeError`` or ``KeyError``
and never a value the answer carried (a host name, an id).
"""

from __future__ import annotations

import contextlib
import enum
import json
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import quote, urlencode, urlsplit

from nova_operator.openstack import http

DEFAULT_MICROVERSION: Final = "2.53"
"""The first microversion that addresses services by UUID."""
SERVICES_MICROVERSION: Final = "2.69"
"""A cell that does not answer lists its services with status UNKNOWN instead of leaving them out."""
HYPERVISORS_MICROVERSION: Final = "2.88"
REQUEST_TIMEOUT: Final = 10.0
"""The total deadline of one request (connect, send, headers, body), the token request too."""
HYPERVISOR_PAGE: Final = 500
HYPERVISOR_MAX_PAGES: Final = 100
LIST_BODY: Final = 8 * 1024 * 1024
"""Unpaged lists (services, aggregates): the spec's 8 MiB decoding limit."""
PAGE_BODY: Final = 2 * 1024 * 1024
"""One hypervisor page of 500 (about 0.5 KiB each at 2.88) or the first page of servers."""
WRITE_BODY: Final = 256 * 1024
"""The answer to a PUT, POST or DELETE (one service or aggregate at most)."""
AGGREGATE_MARKER: Final = "c5c3.io:nova"
INT32_MAX: Final = 2**31 - 1


class ComputeAPIError(Exception):
    """A failed Keystone or Nova call: ``<METHOD> <path>: HTTP <code> <phrase>`` (status 0: no answer).

    The message is fixed text: never a byte of the answer's body, which the tenant controls.
    """

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


SHAPE_ERROR: Final = "answer is not in the documented shape"


@contextlib.contextmanager
def _decoding(what: str) -> Iterator[None]:
    """Turn what a malformed answer raises while it is read into a ``ComputeAPIError`` in fixed words.

    The original exception is dropped (``from None``): its text may quote a value of the answer.
    """
    try:
        yield
    except (TypeError, KeyError, ValueError, AttributeError, IndexError, OverflowError):
        raise ComputeAPIError(f"{what}: {SHAPE_ERROR}") from None


class AggregateExists(ComputeAPIError):
    """POST /os-aggregates answered 409: another creator won the race."""


class DeleteOutcome(enum.Enum):
    DELETED = "deleted"
    GONE = "gone"  # 404: somebody else deleted it; counts as done
    CONFLICT = "conflict"  # 409: instances or migrations remain on the host


@dataclass(frozen=True, slots=True)
class Credentials:
    auth_url: str
    username: str
    password: str = field(repr=False)
    project_name: str
    user_domain_name: str
    project_domain_name: str
    ca_bundle: str = field(default="", repr=False)  # PEM of spec.tls; empty: the system's CAs


UNTRUSTED_HINT: Final = "set spec.tls.caBundleSecretRef of the Nova to a bundle of the CA that issued it"


def _transport_text(what: str, url: str, exc: http.TransportError) -> str:
    """``<what>: <fixed words>``; an untrusted certificate names the host dialled and the field to set."""
    if exc.kind is http.Failure.UNTRUSTED:
        host = urlsplit(url).hostname or "the endpoint"
        return f"{what}: the certificate of {host} is not trusted ({UNTRUSTED_HINT})"
    return f"{what}: {exc}"


def trust_of(credentials: Credentials) -> ssl.SSLContext | None:
    """The SSL context of ``credentials.ca_bundle`` (None: the system's CAs); ``ComputeAPIError`` for a
    bundle without a certificate."""
    if not credentials.ca_bundle:
        return None
    try:
        return http.trusted(credentials.ca_bundle)
    except http.BadBundle as exc:
        raise ComputeAPIError(f"the CA bundle of the Nova's spec.tls.caBundleSecretRef {exc}") from None


@dataclass(frozen=True, slots=True)
class ComputeService:
    id: str
    host: str
    status: str
    state: str
    disabled_reason: str
    binary: str = "nova-compute"


@dataclass(frozen=True, slots=True)
class Aggregate:
    id: int
    name: str
    availability_zone: str
    hosts: tuple[str, ...]
    metadata: Mapping[str, str]


def keystone_v3_url(base: str) -> str:
    """Trim a trailing ``/``, then append ``/v3`` unless it is already there."""
    url = base.rstrip("/")
    return url if url.endswith("/v3") else f"{url}/v3"


class ComputeClient:
    """One Keystone token, shared by every call made through this client (one per pass)."""

    def __init__(
        self,
        token: str,
        nova_url: str,
        *,
        request_timeout: float = REQUEST_TIMEOUT,
        trust: ssl.SSLContext | None = None,
    ) -> None:
        self._token = token
        self._nova_url = nova_url.rstrip("/")
        self._timeout = request_timeout
        self._trust = trust

    def __repr__(self) -> str:  # never the token
        return f"ComputeClient({self._nova_url!r})"

    @classmethod
    async def connect(
        cls, credentials: Credentials, nova_url: str, *, request_timeout: float = REQUEST_TIMEOUT
    ) -> ComputeClient:
        """Authenticate now (``POST /v3/auth/tokens``), so an auth failure surfaces before any call.

        The token is the ``X-Subject-Token`` header of a 201; the body (the catalog) is never read.
        """
        what = "POST /v3/auth/tokens"
        if "?" in credentials.auth_url or "#" in credentials.auth_url:
            # '/v3/auth/tokens' would land in the query or the fragment, and the password would go
            # to the path before it; the CRD refuses such a URL, a Nova admitted earlier may hold one
            raise ComputeAPIError(
                f"{what}: the Keystone URL holds a query or a fragment ('?' or '#'); nothing was sent"
            )
        body = {
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {
                            "name": credentials.username,
                            "domain": {"name": credentials.user_domain_name},
                            "password": credentials.password,
                        }
                    },
                },
                "scope": {
                    "project": {
                        "name": credentials.project_name,
                        "domain": {"name": credentials.project_domain_name},
                    }
                },
            }
        }
        trust = trust_of(credentials)
        url = keystone_v3_url(credentials.auth_url) + "/auth/tokens"
        try:
            reply = await http.request(
                "POST",
                url,
                headers={"Accept": "application/json", "Content-Type": "application/json"},
                json_body=body,
                deadline=request_timeout,
                max_body=0,
                read_body=False,
                trust=trust,
            )
        except http.TransportError as exc:
            raise ComputeAPIError(_transport_text(what, url, exc)) from None
        if reply.status != 201:
            raise ComputeAPIError(_status_text(what, reply.status), status=reply.status)
        token = reply.headers.get("X-Subject-Token", "")
        if not token:
            raise ComputeAPIError(f"{what}: HTTP 201 without an X-Subject-Token header", status=201)
        return cls(token, nova_url, request_timeout=request_timeout, trust=trust)

    # -- services ----------------------------------------------------------------------------

    async def list_services(self) -> dict[str, ComputeService]:
        """The nova-compute services by host (2.69). A service in status UNKNOWN fails the whole list."""
        doc = await self._call(
            "GET", "/v2.1/os-services?binary=nova-compute", mv=SERVICES_MICROVERSION, max_body=LIST_BODY
        )
        out: dict[str, ComputeService] = {}
        with _decoding("GET /v2.1/os-services"):
            for raw in _items(doc, "services"):
                if raw.get("status") == "UNKNOWN":
                    # the host is the tenant's API's word: not quoted
                    raise ComputeAPIError(
                        "GET /v2.1/os-services: a compute service is in a cell that did not answer "
                        "(status UNKNOWN)"
                    )
                out[str(raw["host"])] = ComputeService(
                    id=str(raw["id"]),
                    host=str(raw["host"]),
                    status=str(raw.get("status") or ""),
                    state=str(raw.get("state") or ""),
                    disabled_reason=str(raw.get("disabled_reason") or ""),
                )
        return out

    async def list_all_services(self) -> list[ComputeService]:
        """Every service record the API lists, whatever its binary (2.69, one unfiltered GET).

        A record in a cell that did not answer comes as status ``UNKNOWN`` with no id and no state:
        it is returned that way (id ``""``), for the caller to leave alone.
        """
        doc = await self._call("GET", "/v2.1/os-services", mv=SERVICES_MICROVERSION, max_body=LIST_BODY)
        with _decoding("GET /v2.1/os-services"):
            return [
                ComputeService(
                    id=str(raw.get("id") or ""),
                    host=str(raw.get("host") or ""),
                    status=str(raw.get("status") or ""),
                    state=str(raw.get("state") or ""),
                    disabled_reason=str(raw.get("disabled_reason") or ""),
                    binary=str(raw.get("binary") or ""),
                )
                for raw in _items(doc, "services")
            ]

    async def disable_service(self, service_id: str, reason: str) -> None:
        await self._call(
            "PUT",
            f"/v2.1/os-services/{quote(service_id, safe='')}",
            body={"status": "disabled", "disabled_reason": reason},
        )

    async def delete_service(self, service_id: str) -> DeleteOutcome:
        path = f"/v2.1/os-services/{quote(service_id, safe='')}"
        status, _ = await self._send("DELETE", path, allow=(404, 409))
        if status == 404:
            return DeleteOutcome.GONE
        if status == 409:
            return DeleteOutcome.CONFLICT
        return DeleteOutcome.DELETED

    # -- hypervisors and servers ---------------------------------------------------------------

    async def mapped_hosts(self, *, page_size: int = HYPERVISOR_PAGE) -> set[str]:
        """Every ``service.host`` of the hypervisor list (2.88), paged until a page comes back empty.

        A short page does not end the list: Nova applies the limit before it drops unmapped nodes.
        """
        hosts: set[str] = set()
        marker: str | None = None
        for _ in range(HYPERVISOR_MAX_PAGES):
            query: dict[str, Any] = {"limit": page_size}
            if marker is not None:
                query["marker"] = marker
            doc = await self._call(
                "GET",
                f"/v2.1/os-hypervisors/detail?{urlencode(query)}",
                mv=HYPERVISORS_MICROVERSION,
                max_body=PAGE_BODY,
            )
            with _decoding("GET /v2.1/os-hypervisors/detail"):
                page = _items(doc, "hypervisors")
                if not page:
                    return hosts
                for hv in page:
                    host = (hv.get("service") or {}).get("host")
                    if host:
                        hosts.add(str(host))
                marker = str(page[-1]["id"])
        raise ComputeAPIError(f"GET /v2.1/os-hypervisors/detail: gave up after {HYPERVISOR_MAX_PAGES} pages")

    async def count_servers(self, host: str) -> int:
        """Servers on ``host`` (first page only: enough to tell zero from non-zero), capped at int32."""
        doc = await self._call(
            "GET", f"/v2.1/servers?{urlencode({'all_tenants': 1, 'host': host})}", max_body=PAGE_BODY
        )
        with _decoding("GET /v2.1/servers"):
            return min(len(_items(doc, "servers")), INT32_MAX)

    # -- aggregates --------------------------------------------------------------------------

    async def list_aggregates(self) -> list[Aggregate]:
        doc = await self._call("GET", "/v2.1/os-aggregates", max_body=LIST_BODY)
        with _decoding("GET /v2.1/os-aggregates"):
            return [_aggregate(raw) for raw in _items(doc, "aggregates")]

    async def create_aggregate(self, name: str, availability_zone: str) -> Aggregate:
        """``POST /os-aggregates``; ``availability_zone`` is omitted when empty. 409: ``AggregateExists``."""
        body: dict[str, Any] = {"name": name}
        if availability_zone:
            body["availability_zone"] = availability_zone
        status, doc = await self._send("POST", "/v2.1/os-aggregates", body={"aggregate": body}, allow=(409,))
        if status == 409:
            raise AggregateExists(f"POST /v2.1/os-aggregates: HTTP 409: aggregate {name} exists", status=409)
        with _decoding("POST /v2.1/os-aggregates"):
            return _aggregate(doc.get("aggregate") or {})

    async def set_aggregate_metadata(self, aggregate_id: int, metadata: Mapping[str, str]) -> None:
        await self._call(
            "POST",
            f"/v2.1/os-aggregates/{int(aggregate_id)}/action",
            body={"set_metadata": {"metadata": dict(metadata)}},
        )

    async def delete_aggregate(self, aggregate_id: int) -> DeleteOutcome:
        status, _ = await self._send("DELETE", f"/v2.1/os-aggregates/{int(aggregate_id)}", allow=(404,))
        return DeleteOutcome.GONE if status == 404 else DeleteOutcome.DELETED

    # -- plumbing ----------------------------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        mv: str = DEFAULT_MICROVERSION,
        max_body: int = WRITE_BODY,
    ) -> dict[str, Any]:
        _, doc = await self._send(method, path, body=body, mv=mv, max_body=max_body)
        return doc

    async def _send(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        mv: str = DEFAULT_MICROVERSION,
        allow: tuple[int, ...] = (),
        max_body: int = WRITE_BODY,
    ) -> tuple[int, dict[str, Any]]:
        headers = {
            "X-Auth-Token": self._token,
            "X-OpenStack-Nova-API-Version": mv,
            "OpenStack-API-Version": f"compute {mv}",
            "Accept": "application/json",
        }
        shown = f"{method} {path.split('?', 1)[0]}"
        try:
            reply = await http.request(
                method,
                self._nova_url + path,
                headers=headers,
                json_body=body,
                deadline=self._timeout,
                max_body=max_body,
                trust=self._trust,
            )
        except http.TransportError as exc:
            raise ComputeAPIError(_transport_text(shown, self._nova_url, exc)) from None
        if reply.status in allow:
            return reply.status, {}
        if not 200 <= reply.status < 300:
            raise ComputeAPIError(_status_text(shown, reply.status), status=reply.status)
        if not reply.body:
            return reply.status, {}
        try:
            doc = json.loads(reply.body)
        except ValueError:
            raise ComputeAPIError(f"{shown}: response is not JSON") from None
        if not isinstance(doc, dict):  # a list or a scalar is no answer of the compute API
            raise ComputeAPIError(f"{shown}: {SHAPE_ERROR}")
        return reply.status, doc


def _items(doc: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    """``doc[key]``, a list of objects (missing or null: empty); ``TypeError`` for any other shape."""
    items = doc.get(key) or []
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise TypeError(key)
    return items


def _aggregate(raw: Mapping[str, Any]) -> Aggregate:
    """One aggregate object; ``TypeError``, ``ValueError`` or ``AttributeError`` for a malformed one."""
    if not isinstance(raw, Mapping):
        raise TypeError("aggregate")
    hosts = raw.get("hosts") or []
    if not isinstance(hosts, list):
        raise TypeError("hosts")
    return Aggregate(
        id=int(raw.get("id", 0)),
        name=str(raw.get("name") or ""),
        availability_zone=str(raw.get("availability_zone") or ""),
        hosts=tuple(str(h) for h in hosts),
        metadata={str(k): str(v) for k, v in (raw.get("metadata") or {}).items()},
    )


def _status_text(what: str, status: int) -> str:
    """``<what>: HTTP <code> <standard phrase>``: fixed text only, never the answer's body or reason."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "unexpected status"
    if 300 <= status < 400:
        phrase += " (redirects are not followed)"
    return f"{what}: HTTP {status} {phrase}"
