"""The database pools nova's processes open, and the per-user connection caps that follow from them.

oslo.db gives every engine (one per database URL a process uses) a pool of ``max_pool_size``
connections plus ``max_overflow`` more under load: 5 + 50 by default, far more than any cap the
MariaDB ``User`` can carry. The operator renders both in ``[database]`` and ``[api_database]``
(``pool_keys``) and sizes ``maxUserConnections`` from them (``max_user_connections``):

- per engine, ``max_pool_size + max_overflow`` connections (rendered: ``threads`` + ``threads``,
  ``threads`` the larger uWSGI thread count of the API and the metadata API, so one thread can
  hold a second, independent transaction on the same engine);
- but the conductor's ``[database]`` (its overlay, ``conductor_pool_keys``): ``executor_thread_pool_size``
  + 1 connections per engine (64 + 1 by default: ``max_pool_size`` 5, ``max_overflow`` 60). Each of
  its concurrent RPC handlers may hold two at once (``instance_create`` opens an independent
  transaction for the default security group while its own is open): with fewer connections than
  handlers + 1, builds that arrive together can each hold one and wait for a second until
  oslo.db's ``pool_timeout`` (30 s) fails them all;
- per process, one engine on the ``nova_api`` schema, and up to three with the cell user: the
  ``[database]`` connection, and the cell1 and cell0 mappings, each a context manager of its own;
  the console proxy opens only ``[database]``, and none on ``nova_api``;
- per pod, the uWSGI processes (the master loads no app: ``--lazy-apps``), or ``workers`` plus
  the parent (the scheduler's parent loads its host caches before it forks);
- per role, the replicas plus one (a rolling update's surge; the API at ``maxReplicas`` under
  autoscaling), and two one-process Jobs (a db-sync or upgrade phase, and a db-archive run).

A ``max_pool_size`` of 0 (or below), or a negative ``max_overflow``, set in ``extraConfig`` lifts
oslo.db's bound; the cap is then 0, which MariaDB reads as no cap. ``docs/operations.md``
("Database connections") gives the figures for the defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from nova_operator.catalog import oslo_name
from nova_operator.models.nova import Nova

Block = Literal["api", "cell"]  # as renderers.secrets.Block (imported there from novaconf: no cycle)
SECTIONS: Final[Mapping[Block, str]] = {"api": "api_database", "cell": "database"}
POOL_OPTIONS: Final = ("max_pool_size", "max_overflow")
CELL_ENGINES: Final = 3
"""``[database]``, cell1's and cell0's mapping: the engines a process may open as the cell user."""
JOBS: Final = 2
"""One-process Jobs that may run beside the Deployments: a db-sync (or upgrade phase) and a db-archive."""
EXECUTOR_THREADS: Final = 64
"""oslo.messaging's ``executor_thread_pool_size`` default: the RPC handlers a process runs at once."""
KEPT: Final = 5
"""oslo.db's ``max_pool_size`` default: the conductor's connections kept open between uses."""


def threads(nova: Nova) -> int:
    """The rendered ``max_pool_size`` (and ``max_overflow``): the most threads a uWSGI process runs."""
    return max(nova.spec.api.uwsgi.threads, nova.spec.metadata.uwsgi.threads, 1)


def pool_keys(nova: Nova) -> dict[str, str]:
    """The keys rendered into both ``[database]`` and ``[api_database]``."""
    size = str(threads(nova))
    return {"max_pool_size": size, "max_overflow": size}


def _extra(nova: Nova, section: str, options: tuple[str, ...] = POOL_OPTIONS) -> dict[str, str]:
    """What ``extraConfig`` sets of ``section``'s ``options`` (as oslo.config reads the names)."""
    found: dict[str, str] = {}
    for name, given in (nova.spec.extra_config or {}).items():
        for key, value in given.items():
            s, k = oslo_name(name, key)
            if s == section and k in options:
                found[k] = str(value).strip()
    return found


def executor_threads(nova: Nova) -> int:
    """``[DEFAULT] executor_thread_pool_size`` as the conductor reads it (``extraConfig`` or 64)."""
    value = _extra(nova, "DEFAULT", ("executor_thread_pool_size",)).get("executor_thread_pool_size")
    try:
        return max(int(value), 1) if value is not None else EXECUTOR_THREADS
    except ValueError:
        return EXECUTOR_THREADS


def conductor_pool_keys(nova: Nova) -> dict[str, str]:
    """The conductor's ``[database]`` pool (its overlay), less what ``extraConfig`` sets there (which
    nova.conf carries to every role)."""
    limit = executor_threads(nova) + 1
    size = min(KEPT, limit)
    keys = {"max_pool_size": str(size), "max_overflow": str(limit - size)}
    return {k: v for k, v in keys.items() if k not in _extra(nova, SECTIONS["cell"])}


def per_engine(nova: Nova, block: Block, *, conductor: bool = False) -> int | None:
    """``max_pool_size + max_overflow`` as nova reads them (``extraConfig`` over the rendered keys;
    the conductor's overlay over both for its cell engines); None when either lifts the bound (or
    is not an integer)."""
    effective = {**pool_keys(nova), **_extra(nova, SECTIONS[block])}
    if conductor and block == "cell":
        effective.update(conductor_pool_keys(nova))
    try:
        size, overflow = int(effective["max_pool_size"]), int(effective["max_overflow"])
    except ValueError:
        return None
    if size <= 0 or overflow < 0:
        return None
    return size + overflow


def _engines(block: Block) -> int:
    return 1 if block == "api" else CELL_ENGINES


def conductor_engines(nova: Nova, block: Block) -> int:
    """The engines of ``block``'s user the conductor's processes may hold at once, summed."""
    conductor = nova.spec.conductor
    return (conductor.deployment.replicas + 1) * (conductor.workers + 1) * _engines(block)


def process_engines(nova: Nova, block: Block) -> int:
    """The engines of ``block``'s user that every process of the cluster may hold at once, summed."""
    spec = nova.spec
    api_pods = spec.autoscaling.max_replicas if spec.autoscaling is not None else spec.api.deployment.replicas
    processes = (
        (api_pods + 1) * spec.api.uwsgi.processes
        + (spec.metadata.deployment.replicas + 1) * spec.metadata.uwsgi.processes
        + (spec.scheduler.deployment.replicas + 1) * (spec.scheduler.workers + 1)
        + JOBS
    )
    total = processes * _engines(block) + conductor_engines(nova, block)
    proxy = spec.console_proxy.effective_deployment
    if block == "cell" and proxy is not None:
        total += proxy.replicas + 1  # one process, [database] only
    return total


def max_user_connections(nova: Nova, block: Block) -> int:
    """What every pool of ``block``'s user can open at once (0, no cap, when a pool is unbounded)."""
    limit, conductor_limit = per_engine(nova, block), per_engine(nova, block, conductor=True)
    if limit is None or conductor_limit is None:
        return 0
    conductor = conductor_engines(nova, block)
    return (process_engines(nova, block) - conductor) * limit + conductor * conductor_limit
