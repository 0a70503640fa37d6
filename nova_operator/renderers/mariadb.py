"""The mariadb-operator Database, User and Grant objects of the two database blocks (managed mode only).

The cell block also provisions cell0: a second ``Database`` (``<database>_cell0``) and, in
Static mode, a ``Grant`` on it for the cell block's own user (no second ``User``).
"""

from __future__ import annotations

from typing import Any

from nova_operator import naming
from nova_operator.models.common import DatabaseSpec
from nova_operator.models.nova import Nova
from nova_operator.renderers.db_pools import max_user_connections
from nova_operator.renderers.secrets import Block, instance_name
from nova_operator.renderers.workload import plain

__all__ = ["API_VERSION", "mariadb_objects", "max_user_connections"]

API_VERSION = "k8s.mariadb.com/v1alpha1"


def _meta(nova: Nova, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": nova.metadata.namespace or "default",
        "labels": naming.common_labels(nova.metadata.name or ""),
    }


def _database(nova: Nova, block: DatabaseSpec, name: str, schema: str) -> dict[str, Any]:
    assert block.cluster_ref is not None
    return {
        "apiVersion": API_VERSION,
        "kind": "Database",
        "metadata": _meta(nova, name),
        "spec": {
            "mariaDbRef": {"name": block.cluster_ref.name},
            "name": schema,
            "characterSet": "utf8",
            "collate": "utf8_general_ci",
        },
    }


def _grant(nova: Nova, block: DatabaseSpec, name: str, schema: str, username: str) -> dict[str, Any]:
    assert block.cluster_ref is not None
    return {
        "apiVersion": API_VERSION,
        "kind": "Grant",
        "metadata": _meta(nova, name),
        "spec": {
            "mariaDbRef": {"name": block.cluster_ref.name},
            "privileges": ["ALL PRIVILEGES"],
            "database": schema,
            "table": "*",
            "username": username,
            "host": "%",
        },
    }


def _user(nova: Nova, block: DatabaseSpec, name: str, which: Block) -> dict[str, Any]:
    assert block.cluster_ref is not None
    return {
        "apiVersion": API_VERSION,
        "kind": "User",
        "metadata": _meta(nova, name),
        "spec": {
            "mariaDbRef": {"name": block.cluster_ref.name},
            "name": name,
            "host": "%",
            "passwordSecretKeyRef": {"name": block.secret_ref.name, "key": "password"},
            "maxUserConnections": max_user_connections(nova, which),
        },
    }


def mariadb_objects(nova: Nova) -> list[dict[str, Any]]:
    """Every MariaDB object, in creation order; empty for brownfield blocks.

    Per block: Database, then (Static only) User and Grant.  The cell block inserts cell0's
    Database after its own and ends with cell0's Grant, so no grant precedes its schema or user.
    """
    objects: list[dict[str, Any]] = []
    for which, block in (("api", nova.spec.api_database), ("cell", nova.spec.database)):
        if block.cluster_ref is None:
            continue
        name = instance_name(nova, which)  # type: ignore[arg-type]
        static = block.credentials_mode != "Dynamic"
        objects.append(_database(nova, block, name, block.database))
        cell0 = naming.cell0_object_name(nova.metadata.name or "", block.database)
        cell0_schema = naming.cell0_schema(block.database)
        if which == "cell":
            objects.append(_database(nova, block, cell0, cell0_schema))
        if static:
            objects.append(_user(nova, block, name, which))  # type: ignore[arg-type]
            objects.append(_grant(nova, block, name, block.database, name))
            if which == "cell":
                objects.append(_grant(nova, block, cell0, cell0_schema, name))
    return [plain(o) for o in objects]
