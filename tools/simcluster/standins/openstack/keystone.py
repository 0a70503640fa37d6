"""The fake Keystone v3: the version documents and ``POST /v3/auth/tokens`` (password or application
credential), answering 201 with ``X-Subject-Token`` and a catalog that names the fake Nova."""

from __future__ import annotations

import secrets
import uuid
from datetime import UTC, datetime

from aiohttp import web

from simcluster.standins.openstack.api import keystone_error
from simcluster.standins.openstack.cloud import JSON, Cloud, User


class KeystoneAPI:
    def __init__(self, cloud: Cloud) -> None:
        self.cloud = cloud

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/", self._ks_versions)
        router.add_get("/v3", self._ks_v3)
        router.add_get("/v3/", self._ks_v3)
        router.add_post("/v3/auth/tokens", self._ks_tokens)

    async def _ks_versions(self, request: web.Request) -> web.Response:
        return web.json_response({"versions": {"values": [self._ks_version_doc()]}}, status=300)

    async def _ks_v3(self, request: web.Request) -> web.Response:
        return web.json_response({"version": self._ks_version_doc()})

    def _ks_version_doc(self) -> JSON:
        return {
            "id": "v3.14",
            "status": "stable",
            "updated": "2020-04-07T00:00:00Z",
            "links": [{"rel": "self", "href": f"{self.cloud.keystone_url}/v3/"}],
            "media-types": [
                {"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}
            ],
        }

    async def _ks_tokens(self, request: web.Request) -> web.Response:
        try:
            identity = (await request.json())["auth"]["identity"]
            methods = identity["methods"]
        except (ValueError, KeyError, TypeError):
            return keystone_error(400, "Bad Request", "Expecting to find auth.identity in the request body.")
        user: User | None = None
        with self.cloud.lock:
            if "password" in methods:
                u = identity.get("password", {}).get("user", {})
                candidate = self.cloud.users.get(u.get("name", "")) or next(
                    (x for x in self.cloud.users.values() if x.id == u.get("id")), None
                )
                domain = (u.get("domain") or {}).get("name") or (u.get("domain") or {}).get("id")
                if (
                    candidate
                    and candidate.password == u.get("password")
                    and (u.get("id") or domain in (candidate.domain, "default"))
                ):
                    user = candidate
            elif "application_credential" in methods:
                ac = identity.get("application_credential", {})
                entry = self.cloud.app_credentials.get(ac.get("id", ""))
                if entry is None and ac.get("name"):
                    user_name = (ac.get("user") or {}).get("name")
                    entry = next(
                        (
                            e
                            for e in self.cloud.app_credentials.values()
                            if e[1] == ac["name"] and e[2] == user_name
                        ),
                        None,
                    )
                if entry and entry[0] == ac.get("secret"):
                    user = self.cloud.users.get(entry[2])
            scope = ((await request.json())["auth"].get("scope") or {}).get("project") or {}
            if user is not None and scope.get("name") and scope["name"] != user.project:
                user = None  # not a member of that project
            if user is None:
                return keystone_error(
                    401, "Unauthorized", "The request you have made requires authentication."
                )
            token = "gAAAAA" + secrets.token_urlsafe(32)
            self.cloud.tokens[token] = user
        now = datetime.now(UTC)
        body = {
            "token": {
                "methods": methods,
                "user": {
                    "id": user.id,
                    "name": user.name,
                    "domain": {"id": "default", "name": user.domain},
                    "password_expires_at": None,
                },
                "project": {
                    "id": self.cloud.project_id,
                    "name": user.project,
                    "domain": {"id": "default", "name": user.project_domain},
                },
                "roles": [{"id": uuid.uuid5(uuid.NAMESPACE_DNS, r).hex, "name": r} for r in user.roles],
                "is_domain": False,
                "audit_ids": [secrets.token_urlsafe(16)],
                "issued_at": now.strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                "expires_at": now.replace(year=now.year + 1).strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                "catalog": self._catalog(),
            }
        }
        return web.json_response(body, status=201, headers={"X-Subject-Token": token})

    def _catalog(self) -> list[JSON]:
        def entry(type_: str, name: str, url: str) -> JSON:
            return {
                "id": uuid.uuid5(uuid.NAMESPACE_URL, url).hex,
                "type": type_,
                "name": name,
                "endpoints": [
                    {
                        "id": uuid.uuid5(uuid.NAMESPACE_URL, url + i).hex,
                        "interface": i,
                        "region": "RegionOne",
                        "region_id": "RegionOne",
                        "url": url,
                    }
                    for i in ("public", "internal", "admin")
                ],
            }

        return [
            entry("identity", "keystone", f"{self.cloud.keystone_url}/v3"),
            entry("compute", "nova", f"{self.cloud.nova_url}/v2.1"),
        ]
