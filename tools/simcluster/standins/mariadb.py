"""The mariadb-operator stand-in (v26.6.0 API).

``MariaDB``, ``Database``, ``User`` and ``Grant`` get ``status.conditions[type=Ready]``;
Database/User/Grant get the finalizer the real controllers add and lose it when deleted. A
Database, User or Grant turns Ready only once its MariaDB is Ready; a User also needs its password
Secret key, a Grant its User. With a ``Backend`` (the real tier) each also acts on the real server:
schemas, users and grants are created and dropped there, and the MariaDB gets a Service in front
of the server.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Iterable

from simcluster.client.asynckube import JSON
from simcluster.client.watchcache import key_of
from simcluster.standins.base import Key, StandIn
from simcluster.standins.objects import condition, is_ready

log = logging.getLogger("simcluster.standins")

MARIADB = "/apis/k8s.mariadb.com/v1alpha1"
FINALIZERS = {
    "databases": "database.k8s.mariadb.com/finalizer",
    "users": "user.k8s.mariadb.com/finalizer",
    "grants": "grant.k8s.mariadb.com/finalizer",
}


class MariaDBOperator(StandIn):
    watches = (
        f"{MARIADB}/mariadbs",
        f"{MARIADB}/databases",
        f"{MARIADB}/users",
        f"{MARIADB}/grants",
        "/api/v1/secrets",
        "/api/v1/services",
    )
    kinds = frozenset({"mariadbs", "databases", "users", "grants"})

    def affected(self, kind: str, obj: JSON) -> Iterable[Key]:
        ns, name = key_of(obj)
        if kind == "mariadbs":
            for plural in ("databases", "users", "grants"):
                for o in self.store(plural).list(ns):
                    yield (plural, *key_of(o))
        elif kind == "users":
            for g in self.store("grants").list(ns):
                yield ("grants", *key_of(g))
        elif kind == "secrets":
            for u in self.store("users").list(ns):
                if (u.get("spec", {}).get("passwordSecretKeyRef") or {}).get("name") == name:
                    yield ("users", *key_of(u))

    async def reconcile(self, kind: str, obj: JSON) -> None:
        if kind == "mariadbs":
            await self._mariadb(obj)
        else:
            await self._child(kind, obj)

    async def _mariadb(self, m: JSON) -> None:
        if m["metadata"].get("deletionTimestamp"):
            return
        replicas = m.get("spec", {}).get("replicas", 1)
        status = {
            "conditions": [condition("Ready", True, "StatefulSetReady", "Running")],
            "currentPrimary": f"{m['metadata']['name']}-0",
            "currentPrimaryPodIndex": 0,
            "replicas": replicas,
        }
        if self.backend is not None:
            await self.backend_service(m, MARIADB, "MariaDB", "mariadb", 3306)
        await self.write_status(MARIADB, "mariadbs", m, status)

    async def _child(self, plural: str, obj: JSON) -> None:
        meta = obj["metadata"]
        if (
            meta.get("deletionTimestamp")
            and self.backend
            and FINALIZERS[plural] in meta.get("finalizers", [])
        ):
            try:
                await asyncio.to_thread(self._drop_on_server, plural, obj)
            except Exception as exc:  # keep the finalizer: the next pass tries again
                log.warning("dropping %s %s failed: %s", plural, meta["name"], exc)
                return
        if await self.finalize(MARIADB, plural, obj, FINALIZERS[plural]):
            return
        ref = obj.get("spec", {}).get("mariaDbRef", {})
        ns = ref.get("namespace") or obj["metadata"]["namespace"]
        if not is_ready(self.store("mariadbs").get(ns, ref.get("name", ""))):
            return  # the real controller waits (waitForIt) and reports nothing useful yet
        if plural == "users" and not self._password_present(obj):
            return
        if plural == "grants" and not self._grant_user_ready(obj):
            return
        if self.backend is not None:
            try:
                await asyncio.to_thread(self._apply_on_server, plural, obj)
            except Exception as exc:
                msg = str(exc)
                if plural == "users":  # never echo a statement that may carry the password
                    msg = "creating the user failed"
                await self.write_status(
                    MARIADB, plural, obj, {"conditions": [condition("Ready", False, "Failed", msg[:500])]}
                )
                return
        await self.write_status(
            MARIADB, plural, obj, {"conditions": [condition("Ready", True, "Created", "Created")]}
        )

    def _apply_on_server(self, plural: str, obj: JSON) -> None:
        """What the mariadb-operator's controllers run on the server (blocking: in a thread)."""
        assert self.backend is not None
        spec, name = obj.get("spec", {}), obj["metadata"]["name"]
        if plural == "databases":
            self.backend.create_database(
                spec.get("name") or name,
                charset=spec.get("characterSet") or "utf8",
                collation=spec.get("collate") or "utf8_general_ci",
            )
        elif plural == "users":
            self.backend.ensure_user(
                spec.get("name") or name,
                self._password(obj),
                max_connections=int(spec.get("maxUserConnections") or 0),
                host=spec.get("host") or "%",
            )
        elif plural == "grants":
            self.backend.grant(
                spec.get("privileges") or [],
                spec.get("database") or "*",
                spec.get("table") or "*",
                spec["username"],
                host=spec.get("host") or "%",
                grant_option=bool(spec.get("grantOption")),
            )

    def _drop_on_server(self, plural: str, obj: JSON) -> None:
        assert self.backend is not None
        spec, name = obj.get("spec", {}), obj["metadata"]["name"]
        if plural == "databases":
            self.backend.drop_database(spec.get("name") or name)
        elif plural == "users":
            self.backend.drop_user(spec.get("name") or name, spec.get("host") or "%")
        elif plural == "grants":
            self.backend.revoke_all(
                spec.get("database") or "*",
                spec.get("table") or "*",
                spec["username"],
                host=spec.get("host") or "%",
            )

    def _password(self, user: JSON) -> str:
        ref = user.get("spec", {}).get("passwordSecretKeyRef") or {}
        secret = self.store("secrets").get(user["metadata"]["namespace"], ref.get("name", "")) or {}
        raw = (secret.get("data") or {}).get(ref.get("key", ""), "")
        return base64.b64decode(raw).decode() if raw else ""

    def _password_present(self, user: JSON) -> bool:
        ref = user.get("spec", {}).get("passwordSecretKeyRef")
        if not ref:
            return True
        secret = self.store("secrets").get(user["metadata"]["namespace"], ref.get("name", ""))
        return bool(secret and (secret.get("data") or {}).get(ref["key"]))

    def _grant_user_ready(self, grant: JSON) -> bool:
        ns, username = grant["metadata"]["namespace"], grant.get("spec", {}).get("username")
        return any(
            (u.get("spec", {}).get("name") or u["metadata"]["name"]) == username and is_ready(u)
            for u in self.store("users").list(ns)
        )
