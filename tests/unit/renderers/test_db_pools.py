"""The rendered database pools and the MariaDB users' caps sized from them (``renderers.db_pools``)."""

from __future__ import annotations

import configparser
from collections.abc import Callable

import pytest

from nova_operator.models.nova import Nova
from nova_operator.renderers import db_pools, mariadb, novaconf

Load = Callable[[str], Nova]


def _edit(nova: Nova, change: Callable[[Nova], None]) -> Nova:
    copy = nova.model_copy(deep=True)
    change(copy)
    return copy


def _conf(nova: Nova) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(novaconf.nova_conf(novaconf.conf_inputs(nova)))
    return parser


def _caps(nova: Nova) -> dict[str, int]:
    """``maxUserConnections`` of the two ``User`` objects, as rendered."""
    return {
        o["metadata"]["name"]: o["spec"]["maxUserConnections"]
        for o in mariadb.mariadb_objects(nova)
        if o["kind"] == "User"
    }


def test_both_databases_pool_one_connection_plus_one_overflow_per_thread(load_sample: Load) -> None:
    conf = _conf(load_sample("minimal"))
    for section in ("database", "api_database"):
        assert (conf[section]["max_pool_size"], conf[section]["max_overflow"]) == ("1", "1")

    def threaded(n: Nova) -> None:
        n.spec.metadata.uwsgi.threads = 4

    conf = _conf(_edit(load_sample("minimal"), threaded))
    for section in ("database", "api_database"):
        assert (conf[section]["max_pool_size"], conf[section]["max_overflow"]) == ("4", "4")


def test_the_default_caps_are_what_every_pool_can_open(load_sample: Load) -> None:
    # processes that may hold pools at once: API (3 + 1 surge) x 2, metadata (1 + 1) x 2,
    # scheduler and conductor (1 + 1) x (2 workers + the parent), two Jobs: 26
    # nova_api: 26 processes x 1 engine x (1 + 1); cell user: 20 of them x 3 engines x (1 + 1), the
    # console proxy's 2 processes x (1 + 1), and the conductor's 6 x 3 engines x (5 + 60)
    assert _caps(load_sample("minimal")) == {"nova-api": 26 * 2, "nova": (20 * 3 + 2) * 2 + 6 * 3 * 65}


def test_the_conductor_pools_one_connection_more_than_its_rpc_handlers(load_sample: Load) -> None:
    # Each handler may hold two connections of one engine (instance_create's independent
    # transaction): one more than the handlers can never all be held by handlers waiting for a second.
    def conductor_conf(nova: Nova) -> configparser.ConfigParser:
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(novaconf.config_data(novaconf.conf_inputs(nova))["conductor.conf"])
        return parser

    base = load_sample("minimal")
    assert dict(conductor_conf(base)["database"]) == {"max_pool_size": "5", "max_overflow": "60"}
    assert not conductor_conf(base).has_section("api_database")  # no nested transaction there
    assert "database" not in novaconf.config_data(novaconf.conf_inputs(base))["scheduler.conf"]

    def fewer_handlers(n: Nova) -> None:
        n.spec.extra_config = {"DEFAULT": {"executor_thread_pool_size": "3"}}

    fewer = _edit(base, fewer_handlers)
    assert dict(conductor_conf(fewer)["database"]) == {"max_pool_size": "4", "max_overflow": "0"}
    assert db_pools.per_engine(fewer, "cell", conductor=True) == 4

    def own_pool(n: Nova) -> None:  # extraConfig's value reaches every role: the overlay yields
        n.spec.extra_config = {"database": {"max_pool_size": "8"}}

    mine = _edit(base, own_pool)
    assert dict(conductor_conf(mine)["database"]) == {"max_overflow": "60"}
    assert db_pools.per_engine(mine, "cell", conductor=True) == 8 + 60


def test_the_caps_follow_workers_threads_and_the_console_proxy(load_sample: Load) -> None:
    base = load_sample("minimal")
    api, cell = db_pools.max_user_connections(base, "api"), db_pools.max_user_connections(base, "cell")

    def more_conductors(n: Nova) -> None:
        n.spec.conductor.workers = 3  # one more process in each of 2 pods (1 replica + surge)

    assert _caps(_edit(base, more_conductors)) == {"nova-api": api + 2 * 2, "nova": cell + 2 * 3 * 65}

    def more_schedulers(n: Nova) -> None:
        n.spec.scheduler.workers = 3

    assert _caps(_edit(base, more_schedulers)) == {"nova-api": api + 2 * 2, "nova": cell + 2 * 3 * 2}

    def no_proxy(n: Nova) -> None:
        n.spec.console_proxy.enabled = False

    assert _caps(_edit(base, no_proxy)) == {"nova-api": api, "nova": cell - 2 * 2}

    def threads(n: Nova) -> None:
        n.spec.api.uwsgi.threads = 3  # every pool but the conductor's cell engines: 3 + 3

    conductor = 6 * 3 * 65
    assert _caps(_edit(base, threads)) == {"nova-api": api * 3, "nova": (cell - conductor) * 3 + conductor}


def test_autoscaling_counts_the_api_at_max_replicas(load_sample: Load) -> None:
    base = load_sample("minimal")
    scaled = Nova.model_validate(
        {
            **base.model_dump(by_alias=True, exclude_none=True),
            "spec": {
                **base.model_dump(by_alias=True, exclude_none=True)["spec"],
                "autoscaling": {"minReplicas": 3, "maxReplicas": 6},
            },
        }
    )
    api, cell = db_pools.max_user_connections(base, "api"), db_pools.max_user_connections(base, "cell")
    # 3 more API pods of 2 processes each, one engine of 1 + 1 on nova_api, three on the cell user
    assert db_pools.max_user_connections(scaled, "api") == api + 3 * 2 * 2
    assert db_pools.max_user_connections(scaled, "cell") == cell + 3 * 2 * 3 * 2


@pytest.mark.parametrize(
    ("section", "options", "api_limit", "cell_limit"),
    [
        ("database", {"max_pool_size": "3"}, 2, 4),  # 3 + the rendered overflow of 1
        ("api_database", {"max_overflow": "0", "max_pool_size": "5"}, 5, 2),
        ("DATABASE", {"max_overflow ": " 2"}, 2, 3),  # as oslo.config reads the section and the key
        ("database", {"max_pool_size": "0"}, 2, None),  # oslo.db: no bound, so no cap
        ("api_database", {"max_overflow": "-1"}, None, 2),
        ("database", {"max_pool_size": "many"}, 2, None),
    ],
)
def test_extra_config_pools_size_the_caps_they_bound(
    load_sample: Load, section: str, options: dict[str, str], api_limit: int | None, cell_limit: int | None
) -> None:
    base = load_sample("minimal")

    def tuned(n: Nova) -> None:
        n.spec.extra_config = {section: options}

    nova = _edit(base, tuned)
    assert (db_pools.per_engine(nova, "api"), db_pools.per_engine(nova, "cell")) == (api_limit, cell_limit)
    for block, limit in (("api", api_limit), ("cell", cell_limit)):
        conductor = db_pools.per_engine(nova, block, conductor=True)  # type: ignore[arg-type]
        if limit is None or conductor is None:
            expected = 0
        else:
            engines = db_pools.conductor_engines(base, block)  # type: ignore[arg-type]
            expected = (db_pools.process_engines(base, block) - engines) * limit + engines * conductor  # type: ignore[arg-type]
        assert db_pools.max_user_connections(nova, block) == expected  # type: ignore[arg-type]
    assert novaconf.overridden_owned_keys(nova.spec.extra_config or {})  # reported as owned keys
