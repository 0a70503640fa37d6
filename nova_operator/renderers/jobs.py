"""The db-sync Job, the three release-upgrade phase Jobs and the db-archive CronJob.

Scripts are jinja2 templates (``templates/db-*.sh.j2``) rendered with shell-quoted values;
the manifests around them are Python data.  The cell mappings are handed *template* URLs
(``{scheme}://{username}:{password}@{hostname}:{port}/…``) that nova expands from its own
connections, so no script ever carries a credential; credentials reach the pods only as
``secretKeyRef`` environment variables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from nova_operator import digests, image_contract, naming
from nova_operator.models.nova import Nova
from nova_operator.renderers.env import render
from nova_operator.renderers.novaconf import CONFIG_DIR
from nova_operator.renderers.pod_env import config_volume, db_tls_volumes, https_ca_volume, manage_env
from nova_operator.renderers.workload import (
    image_pull_policy,
    image_pull_secrets,
    image_ref,
    job_pod_settings,
    memory_figure,
    plain,
    pod_security_context,
    resolve_resources,
    restricted_container_security_context,
)

__all__ = [
    "CELL_TRANSPORT_TEMPLATE",
    "TERMINATION_LOG",
    "ArchiveSettings",
    "archive_script",
    "archive_settings",
    "cell0_template",
    "cell_db_template",
    "contract_script",
    "db_archive_cronjob",
    "db_sync_job",
    "db_sync_script",
    "expand_script",
    "phase_job",
]

Manifest = dict[str, Any]
Phase = Literal["db-expand", "db-migrate", "db-contract"]

TERMINATION_LOG = "/dev/termination-log"
CELL_TRANSPORT_TEMPLATE = "{scheme}://{username}:{password}@{hostname}:{port}/{path}?{query}"
_SCHEMA = re.compile(r"^[A-Za-z0-9_]{1,64}$")
JOB_BACKOFF_LIMIT = 4
ARCHIVE_DEADLINE = 3600
ARCHIVE_BUDGET = ARCHIVE_DEADLINE - 600  # stop starting batches 10 minutes before the deadline
CONTRACT_MAX_COUNT = 1000
POD_SPEC_HASH = "cobaltcore.c5c3.io/pod-spec-hash"


def _schema(nova: Nova) -> str:
    """``spec.database.database``, re-checked: it is interpolated into shell words."""
    database = nova.spec.database.database
    if not _SCHEMA.match(database) or not _SCHEMA.match(naming.cell0_schema(database)):
        raise ValueError("spec.database.database must match ^[A-Za-z0-9_]{1,64}$ (with _cell0 appended too)")
    return database


def cell_db_template(database: str) -> str:
    return f"{{scheme}}://{{username}}:{{password}}@{{hostname}}:{{port}}/{database}?{{query}}"


def cell0_template(database: str) -> str:
    return cell_db_template(naming.cell0_schema(database))


def db_sync_script(nova: Nova, *, termination_log: str = TERMINATION_LOG) -> str:
    """Migrate nova_api, map cell0, create cell1 only when the awk guard finds no mapping, migrate the cell.

    The guard matches a ``list_cells`` row named ``cell1`` or one whose database URL path
    (query cut) ends with ``/<schema>``; a failed listing fails the script, never reads as empty.
    """
    database = _schema(nova)
    return render(
        "db-sync.sh.j2",
        config_dir=CONFIG_DIR,
        database=database,
        cell0_template=cell0_template(database),
        cell_template=cell_db_template(database),
        transport_template=CELL_TRANSPORT_TEMPLATE,
        termination_log=termination_log,
    )


def expand_script(*, termination_log: str = TERMINATION_LOG) -> str:
    return render("db-expand.sh.j2", config_dir=CONFIG_DIR, termination_log=termination_log)


def contract_script() -> str:
    return render("db-contract.sh.j2", config_dir=CONFIG_DIR, max_count=CONTRACT_MAX_COUNT)


def archive_script() -> str:
    return render("db-archive.sh.j2", config_dir=CONFIG_DIR, budget_seconds=ARCHIVE_BUDGET)


def _pod_template(
    nova: Nova,
    *,
    container_name: str,
    command: list[str],
    config_map: str,
    labels: dict[str, str],
    restart_policy: str,
    extra_env: list[Manifest] | None = None,
    checked: bool = False,
) -> Manifest:
    placement, resources = job_pod_settings(nova)
    tls_volumes, tls_mounts = db_tls_volumes(nova, checked=checked)
    https_volumes, https_mounts = https_ca_volume(nova, checked=checked)
    container = {
        "name": container_name,
        "image": image_ref(nova),
        **image_pull_policy(nova),
        "command": command,
        "env": [*manage_env(nova), *(extra_env or [])],
        "resources": resolve_resources(resources, memory_figure(1)),
        "securityContext": restricted_container_security_context(),
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
            *tls_mounts,
            *https_mounts,
        ],
    }
    return {
        "metadata": {"labels": labels},
        "spec": {
            "automountServiceAccountToken": False,
            "restartPolicy": restart_policy,
            "securityContext": pod_security_context(),
            "containers": [container],
            # the whole ConfigMap: nova.conf, the overlays (not read: no --config-dir of theirs), logging.ini
            "volumes": [
                config_volume(config_map),
                {"name": "tmp", "emptyDir": {}},
                *tls_volumes,
                *https_volumes,
            ],
            **placement,
            **image_pull_secrets(nova.spec.image.pull_secrets),
        },
    }


def _job(nova: Nova, suffix: str, command: list[str], config_map: str, *, checked: bool) -> Manifest:
    name = nova.metadata.name or ""
    # The common labels put the Job pods under the NetworkPolicy; the component value is the
    # Job's suffix (reconciler.md §5.6 leaves it unconfirmed), which keeps them out of every
    # Deployment selector and the API PDB.
    labels = naming.labels(name, suffix)
    template = plain(
        _pod_template(
            nova,
            container_name=suffix,
            command=command,
            config_map=config_map,
            labels=labels,
            restart_policy="Never",
            checked=checked,
        )
    )
    return plain(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"{name}-{suffix}",
                "namespace": nova.metadata.namespace or "default",
                "labels": labels,
                "annotations": {POD_SPEC_HASH: digests.pod_spec_hash(template)},
            },
            "spec": {"backoffLimit": JOB_BACKOFF_LIMIT, "template": template},
        }
    )


def db_sync_job(nova: Nova, config_map: str, *, checked: bool = False) -> Manifest:
    """``{name}-db-sync``: both schema migrations and the cell mapping (steady state). ``checked``:
    the pods mount the label-checked copies of the TLS Secrets (``pod_env.db_tls_volumes``)."""
    command = [image_contract.SHELL, "-eu", "-c", db_sync_script(nova)]
    return _job(nova, "db-sync", command, config_map, checked=checked)


def phase_job(nova: Nova, phase: Phase, config_map: str, *, checked: bool = False) -> Manifest:
    """``{name}-db-expand`` / ``{name}-db-migrate`` / ``{name}-db-contract`` of a release upgrade."""
    if phase == "db-expand":
        command = [image_contract.SHELL, "-eu", "-c", expand_script()]
    elif phase == "db-migrate":
        command = ["nova-manage", "--config-dir", CONFIG_DIR, "cell_v2", "list_cells"]
    else:
        command = [image_contract.SHELL, "-eu", "-c", contract_script()]
    return _job(nova, phase, command, config_map, checked=checked)


@dataclass(frozen=True, slots=True)
class ArchiveSettings:
    schedule: str = "@daily"
    max_rows: int = 1000
    sleep: int = 1
    retention_days: int | None = None
    purge_after_days: int | None = None
    suspend: bool = False


def archive_settings(nova: Nova) -> ArchiveSettings:
    """``spec.dbArchive`` with its reconcile-time defaults (never written back)."""
    spec = nova.spec.db_archive
    if spec is None:
        return ArchiveSettings()
    return ArchiveSettings(
        schedule=spec.schedule or "@daily",
        max_rows=spec.max_rows if spec.max_rows is not None else 1000,
        sleep=spec.sleep if spec.sleep is not None else 1,
        retention_days=spec.retention_days,
        purge_after_days=spec.purge_after_days,
        suspend=bool(spec.suspend),
    )


def db_archive_cronjob(nova: Nova, config_map: str, *, checked: bool = False) -> Manifest:
    """``{name}-db-archive``: batches of ``archive_deleted_rows`` (always present)."""
    name = nova.metadata.name or ""
    settings = archive_settings(nova)
    labels = naming.labels(name, naming.Component.DB_ARCHIVE)
    env = [
        {"name": "MAX_ROWS", "value": str(settings.max_rows)},
        {"name": "SLEEP", "value": str(settings.sleep)},
    ]
    if settings.retention_days is not None:
        env.append({"name": "RETENTION_DAYS", "value": str(settings.retention_days)})
    if settings.purge_after_days is not None:
        env.append({"name": "PURGE_AFTER_DAYS", "value": str(settings.purge_after_days)})
    template = _pod_template(
        nova,
        container_name="db-archive",
        command=[image_contract.SHELL, "-eu", "-c", archive_script()],
        config_map=config_map,
        labels=labels,
        restart_policy="OnFailure",
        extra_env=env,
        checked=checked,
    )
    return plain(
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {
                "name": naming.db_archive_name(name),
                "namespace": nova.metadata.namespace or "default",
                "labels": labels,
            },
            "spec": {
                "schedule": settings.schedule,
                "suspend": settings.suspend,
                "concurrencyPolicy": "Forbid",
                "jobTemplate": {
                    "metadata": {"labels": labels},
                    "spec": {"activeDeadlineSeconds": ARCHIVE_DEADLINE, "template": template},
                },
            },
        }
    )
