"""The compute API client: the calls of novacompute-crd.md §14 and nothing else.

No method enables a service, adds or removes an aggregate host, or starts a migration:
the API this module offers cannot express any of them.

keystoneauth1 (and requests under it, about 9 MiB of modules) is imported on the first
connect, not at start-up: an operator that runs no NovaCompute pool never loads it.
"""

from __future__ import annotations

import asyncio
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote, urlencode

if TYPE_CHECKING:
    import requests
    from keystoneauth1 import session as ks_session

DEFAULT_MICROVERSION: Final = "2.53"
"""The first microversion that addresses services by UUID."""
SERVICES_MICROVERSION: Final = "2.69"
"""A cell that does not answer lists its services with status UNKNOWN instead of leaving them out."""
HYPERVISORS_MICROVERSION: Final = "2.88"
REQUEST_TIMEOUT: Final = 10.0
HYPERVISOR_PAGE: Final = 500
HYPERVISOR_MAX_PAGES: Final = 100
MAX_BODY: Final = 8 * 1024 * 1024
ERROR_BODY: Final = 512
AGGREGATE_MARKER: Final = "c5c3.io:nova"
INT32_MAX: Final = 2**31 - 1


class ComputeAPIError(Exception):
    """A failed Keystone or Nova call: ``<METHOD> <path>: HTTP <code>: <body>`` (status 0: no answer)."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


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


@dataclass(frozen=True, slots=True)
class ComputeService:
    id: str
    host: str
    status: str
    state: str
    disabled_reason: str


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

    def __init__(self, session: ks_session.Session, nova_url: str) -> None:
        self._session = session
        self._nova_url = nova_url.rstrip("/")

    @classmethod
    async def connect(
        cls, credentials: Credentials, nova_url: str, *, request_timeout: float = REQUEST_TIMEOUT
    ) -> ComputeClient:
        """Authenticate now (``POST /v3/auth/tokens``), so an auth failure surfaces before any call."""
        from keystoneauth1 import exceptions as ks_exceptions
        from keystoneauth1 import session as ks_session
        from keystoneauth1.identity import v3

        auth = v3.Password(
            auth_url=keystone_v3_url(credentials.auth_url),
            username=credentials.username,
            password=credentials.password,
            user_domain_name=credentials.user_domain_name,
            project_name=credentials.project_name,
            project_domain_name=credentials.project_domain_name,
        )
        session = ks_session.Session(auth=auth, timeout=request_timeout, connect_retries=0)
        client = cls(session, nova_url)
        try:
            await asyncio.to_thread(session.get_token)
        except ks_exceptions.HttpError as exc:
            client.close()
            raise ComputeAPIError(
                f"POST /v3/auth/tokens: HTTP {exc.http_status}", status=exc.http_status
            ) from None
        except (ks_exceptions.ClientException, KeyError, ValueError) as exc:
            client.close()
            raise ComputeAPIError(f"POST /v3/auth/tokens: {type(exc).__name__}: {_first_line(exc)}") from None
        return client

    def close(self) -> None:
        self._session.session.close()

    # -- services ----------------------------------------------------------------------------

    async def list_services(self) -> dict[str, ComputeService]:
        """The nova-compute services by host (2.69). A service in status UNKNOWN fails the whole list."""
        doc = await self._call("GET", "/v2.1/os-services?binary=nova-compute", mv=SERVICES_MICROVERSION)
        out: dict[str, ComputeService] = {}
        for raw in doc.get("services") or []:
            if raw.get("status") == "UNKNOWN":
                raise ComputeAPIError(
                    f"GET /v2.1/os-services: host {raw.get('host')} is in a cell that did not answer "
                    "(status UNKNOWN)"
                )
            out[str(raw["host"])] = ComputeService(
                id=str(raw["id"]),
                host=str(raw["host"]),
                status=str(raw.get("status") or ""),
                state=str(raw.get("state") or ""),
                disabled_reason=raw.get("disabled_reason") or "",
            )
        return out

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
                "GET", f"/v2.1/os-hypervisors/detail?{urlencode(query)}", mv=HYPERVISORS_MICROVERSION
            )
            page = doc.get("hypervisors") or []
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
        doc = await self._call("GET", f"/v2.1/servers?{urlencode({'all_tenants': 1, 'host': host})}")
        return min(len(doc.get("servers") or []), INT32_MAX)

    # -- aggregates --------------------------------------------------------------------------

    async def list_aggregates(self) -> list[Aggregate]:
        doc = await self._call("GET", "/v2.1/os-aggregates")
        return [_aggregate(raw) for raw in doc.get("aggregates") or []]

    async def create_aggregate(self, name: str, availability_zone: str) -> Aggregate:
        """``POST /os-aggregates``; ``availability_zone`` is omitted when empty. 409: ``AggregateExists``."""
        body: dict[str, Any] = {"name": name}
        if availability_zone:
            body["availability_zone"] = availability_zone
        status, doc = await self._send("POST", "/v2.1/os-aggregates", body={"aggregate": body}, allow=(409,))
        if status == 409:
            raise AggregateExists(f"POST /v2.1/os-aggregates: HTTP 409: aggregate {name} exists", status=409)
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
        self, method: str, path: str, *, body: Mapping[str, Any] | None = None, mv: str = DEFAULT_MICROVERSION
    ) -> dict[str, Any]:
        _, doc = await self._send(method, path, body=body, mv=mv)
        return doc

    async def _send(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        mv: str = DEFAULT_MICROVERSION,
        allow: tuple[int, ...] = (),
    ) -> tuple[int, dict[str, Any]]:
        headers = {
            "X-OpenStack-Nova-API-Version": mv,
            "OpenStack-API-Version": f"compute {mv}",
            "Accept": "application/json",
        }
        if body is not None:
            headers["Content-Type"] = "application/json"
        shown = path.split("?", 1)[0]
        from keystoneauth1 import exceptions as ks_exceptions  # loaded by connect already

        try:
            resp: requests.Response = await asyncio.to_thread(
                self._session.request,
                self._nova_url + path,
                method,
                headers=headers,
                json=dict(body) if body is not None else None,
                raise_exc=False,
                log=False,
            )
        except ks_exceptions.HttpError as exc:  # the token request failed (re-auth)
            raise ComputeAPIError(
                f"{method} {shown}: HTTP {exc.http_status}", status=exc.http_status
            ) from None
        except ks_exceptions.ClientException as exc:
            raise ComputeAPIError(f"{method} {shown}: {type(exc).__name__}: {_first_line(exc)}") from None
        if resp.status_code in allow:
            return resp.status_code, {}
        if not 200 <= resp.status_code < 300:
            text = resp.content[:ERROR_BODY].decode("utf-8", errors="replace")
            raise ComputeAPIError(
                f"{method} {shown}: HTTP {resp.status_code}: {text}", status=resp.status_code
            )
        if len(resp.content) > MAX_BODY:
            raise ComputeAPIError(f"{method} {shown}: response larger than {MAX_BODY} bytes")
        if not resp.content:
            return resp.status_code, {}
        try:
            doc = json.loads(resp.content)
        except ValueError:
            raise ComputeAPIError(f"{method} {shown}: response is not JSON") from None
        return resp.status_code, doc if isinstance(doc, dict) else {}


def _aggregate(raw: Mapping[str, Any]) -> Aggregate:
    return Aggregate(
        id=int(raw.get("id", 0)),
        name=str(raw.get("name") or ""),
        availability_zone=raw.get("availability_zone") or "",
        hosts=tuple(str(h) for h in raw.get("hosts") or ()),
        metadata={str(k): str(v) for k, v in (raw.get("metadata") or {}).items()},
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:ERROR_BODY] if text else ""
