"""nova.conf, the role overlays, logging.ini and the compute fragments, byte for byte."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import pytest

from nova_operator.models.nova import Nova
from nova_operator.renderers import novaconf
from nova_operator.renderers.novaconf import ConfInputs, RemoteComputeInputs


def _remote(nova: Nova) -> RemoteComputeInputs | None:
    rc = nova.spec.remote_compute
    return RemoteComputeInputs(keystone_endpoint=rc.keystone_endpoint) if rc else None


def test_config_data_matches_the_goldens(nova: Nova, sample: str, golden: Callable[[str, str], None]) -> None:
    for key, text in novaconf.config_data(novaconf.conf_inputs(nova)).items():
        golden(f"novaconf/{sample}/{key}", text)


def test_compute_fragments_match_the_goldens(
    nova: Nova, sample: str, golden: Callable[[str, str], None]
) -> None:
    inputs = novaconf.conf_inputs(nova)
    golden(f"novaconf/{sample}/nova-compute.conf", novaconf.render_compute_fragment(inputs))
    if (remote := _remote(nova)) is not None:
        golden(
            f"novaconf/{sample}/remote-nova-compute.conf",
            novaconf.render_compute_fragment(inputs, remote=remote),
        )


MINIMAL_SPEC_EXAMPLE = """\
[DEFAULT]
debug = false
state_path = /var/lib/nova
use_stderr = true

[api]
local_metadata_per_cell = false

[api_database]
connection = mysql+pymysql://placeholder
max_overflow = 1
max_pool_size = 1

[cache]
backend = dogpile.cache.pymemcache
enabled = true
memcache_servers = memcached:11211

[database]
connection = mysql+pymysql://placeholder
max_overflow = 1
max_pool_size = 1

[glance]
valid_interfaces = internal

[keystone_authtoken]
auth_type = password
auth_url = http://keystone-api.openstack.svc:5000/v3
memcached_servers = memcached:11211
project_domain_name = Default
project_name = service
user_domain_name = Default
username = nova
www_authenticate_uri = http://keystone-api.openstack.svc:5000/v3

[neutron]
auth_type = password
auth_url = http://keystone-api.openstack.svc:5000/v3
project_domain_name = Default
project_name = service
user_domain_name = Default
username = nova
valid_interfaces = internal

[oslo_concurrency]
lock_path = /var/lib/nova/tmp

[oslo_messaging_notifications]
driver = noop

[oslo_messaging_rabbit]
rabbit_quorum_queue = true
rabbit_transient_quorum_queue = true
use_queue_manager = true

[placement]
auth_type = password
auth_url = http://keystone-api.openstack.svc:5000/v3
project_domain_name = Default
project_name = service
user_domain_name = Default
username = nova
valid_interfaces = internal

[scheduler]
discover_hosts_in_cells_interval = 300

[service_user]
auth_type = password
auth_url = http://keystone-api.openstack.svc:5000/v3
project_domain_name = Default
project_name = service
send_service_user_token = true
user_domain_name = Default
username = nova

[upgrade_levels]
compute = auto

[vnc]
enabled = true
novncproxy_base_url = https://novnc.example.org/vnc_lite.html
"""


def test_the_minimal_cr_renders_the_spec_example_plus_filter_scheduler(
    load_sample: Callable[[str], Nova], monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = novaconf.conf_inputs(load_sample("minimal"))
    monkeypatch.setattr(novaconf, "PIN_FILTER_SCHEDULER", False)
    assert novaconf.nova_conf(inputs) == MINIMAL_SPEC_EXAMPLE
    monkeypatch.setattr(novaconf, "PIN_FILTER_SCHEDULER", True)
    sections = novaconf.nova_conf_sections(inputs)
    assert sections["filter_scheduler"] == {
        "build_failure_weight_multiplier": "0",
        "shuffle_best_same_weighed_hosts": "true",
    }


def test_overlays_are_pinned_byte_for_byte() -> None:
    assert novaconf.metadata_conf() == "[neutron]\nservice_metadata_proxy = true\n"
    assert novaconf.workers_conf("scheduler", 2) == "[scheduler]\nworkers = 2\n"
    assert novaconf.workers_conf("conductor", 5) == "[conductor]\nworkers = 5\n"
    assert novaconf.novncproxy_conf() == (
        "[DEFAULT]\nweb = /usr/share/novnc\n\n[api_database]\nconnection =\n\n"
        "[vnc]\nnovncproxy_host = 0.0.0.0\nnovncproxy_port = 6080\n"
    )


def test_logging_ini_carries_the_root_level_and_every_library_level() -> None:
    text = novaconf.logging_ini(_base(log_format="json", log_level="WARNING"))
    assert text.startswith("[loggers]\nkeys = root, level1, level2, ")
    assert text.endswith("[formatter_json]\nclass = oslo_log.formatters.JSONFormatter\n")
    assert "[logger_root]\nlevel = WARNING\nhandlers = stderr\n" in text
    assert (
        "[handler_stderr]\nclass = StreamHandler\nargs = (sys.stderr,)\nlevel = NOTSET\nformatter = json\n"
        in text
    )
    assert "[logger_level1]\nlevel = WARN\nhandlers =\nqualname = amqp\n" in text
    assert "qualname = sqlalchemy\n" in text
    assert "qualname = oslo.privsep.daemon\n" in text  # nova's own default
    assert "\n\n\n" not in text
    with pytest.raises(novaconf.ConfigError):
        novaconf.logging_ini(_base(log_format="json", log_level="LOUD"))


def test_debug_makes_the_root_debug_and_per_logger_levels_override_the_defaults_in_place() -> None:
    levels = {"sqlalchemy": "INFO", "nova.scheduler": "ERROR", "50%": "DEBUG"}
    text = novaconf.logging_ini(_base(log_format="json", debug=True, per_logger_levels=levels))
    assert "[logger_root]\nlevel = DEBUG\n" in text
    assert "level = INFO\nhandlers =\nqualname = sqlalchemy\n" in text
    assert text.count("qualname = sqlalchemy\n") == 1
    assert "level = ERROR\nhandlers =\nqualname = nova.scheduler\n" in text
    assert "qualname = 50%%\n" in text  # configparser interpolates %


def test_per_logger_levels_keep_oslo_logs_defaults_in_nova_conf_too() -> None:
    conf = novaconf.nova_conf(_base(per_logger_levels={"amqp": "ERROR", "nova": "DEBUG"}))
    line = next(x for x in conf.splitlines() if x.startswith("default_log_levels = "))
    pairs = line.split(" = ", 1)[1].split(",")
    assert pairs[:3] == ["amqp=ERROR", "amqplib=WARN", "boto=WARN"]
    assert "sqlalchemy=WARN" in pairs
    assert pairs[-1] == "nova=DEBUG"
    assert "default_log_levels" not in novaconf.nova_conf(_base())  # oslo.log's own default stands


@pytest.mark.parametrize("name", ["a,b", "a=b", " a", "a "])
def test_a_logger_name_the_level_list_cannot_carry_is_a_config_error(name: str) -> None:
    with pytest.raises(novaconf.ConfigError, match="perLoggerLevels"):
        novaconf.nova_conf(_base(per_logger_levels={name: "DEBUG"}))
    with pytest.raises(novaconf.ConfigError, match="perLoggerLevels"):
        novaconf.logging_ini(_base(log_format="json", per_logger_levels={name: "DEBUG"}))


def _base(**changes: object) -> ConfInputs:
    inputs = ConfInputs(name="nova", namespace="openstack", keystone_endpoint="http://ks:5000/v3")
    return dataclasses.replace(inputs, **changes)  # type: ignore[arg-type]


def test_every_data_key_ships_and_logging_ini_only_under_json() -> None:
    assert list(novaconf.config_data(_base())) == [
        "conductor.conf",
        "metadata.conf",
        "nova.conf",
        "novncproxy.conf",
        "scheduler.conf",
    ]
    data = novaconf.config_data(_base(log_format="json", log_level="ERROR"))
    assert "level = ERROR" in data["logging.ini"]
    assert "log_config_append = /etc/nova/nova.conf.d/logging.ini" in data["nova.conf"]


def test_disabling_the_console_proxy_keeps_every_overlay() -> None:
    enabled, disabled = novaconf.config_data(_base()), novaconf.config_data(_base(console_enabled=False))
    assert set(enabled) == set(disabled)
    assert disabled["novncproxy.conf"] == enabled["novncproxy.conf"]
    assert "[vnc]\nenabled = false\n" in disabled["nova.conf"]
    assert "novncproxy_base_url" not in disabled["nova.conf"]
    fragment = novaconf.render_compute_fragment(_base(console_enabled=False))
    assert fragment.endswith("[vnc]\nenabled = false\n")


def test_without_a_console_gateway_the_base_url_is_the_in_cluster_service() -> None:
    sections = novaconf.nova_conf_sections(_base())
    assert sections["vnc"]["novncproxy_base_url"] == (
        "http://nova-novncproxy.openstack.svc.cluster.local:6080/vnc_lite.html"
    )


def test_no_host_and_no_secret_bearing_key_is_ever_rendered() -> None:
    sections = novaconf.nova_conf_sections(
        _base(cinder_enabled=True, barbican_enabled=True, messaging_tls=True)
    )
    assert "host" not in sections["DEFAULT"]
    assert "transport_url" not in sections["DEFAULT"]
    for options in sections.values():
        assert "password" not in options
        assert "metadata_proxy_shared_secret" not in options
    assert (
        sections["database"]["connection"]
        == sections["api_database"]["connection"]
        == ("mysql+pymysql://placeholder")
    )
    assert sections["oslo_messaging_notifications"] == {"driver": "noop"}
    assert sections["service_user"]["send_service_user_token"] == "true"
    assert "region_name" not in sections["cinder"]


def test_extra_config_wins_per_key_adds_new_keys_and_is_reported_when_owned() -> None:
    extra = {"DEFAULT": {"debug": "true", "cpu_allocation_ratio": "2.0"}, "quota": {"cores": "8"}}
    inputs = _base(extra_config=extra)
    sections = novaconf.nova_conf_sections(inputs)
    assert sections["DEFAULT"]["debug"] == "true"
    assert sections["DEFAULT"]["cpu_allocation_ratio"] == "2.0"
    assert sections["quota"] == {"cores": "8"}
    assert novaconf.overridden_owned_keys(extra) == [("DEFAULT", "debug")]
    # extraConfig never reaches the overlays or the compute fragments
    data = novaconf.config_data(inputs)
    assert all("cpu_allocation_ratio" not in data[k] for k in data if k != "nova.conf")
    assert "cpu_allocation_ratio" not in novaconf.render_compute_fragment(inputs)


@pytest.mark.parametrize(("section", "key"), [(r.section, r.key) for r in novaconf.REJECTED_KEYS])
def test_a_rejected_key_in_extra_config_is_refused_not_rendered(section: str, key: str) -> None:
    inputs = _base(extra_config={section: {key: "s3cr3t"}})
    with pytest.raises(novaconf.ConfigError, match=f"{key} is managed via .* must not be set in extraConfig"):
        novaconf.nova_conf(inputs)


def test_a_shared_host_in_extra_config_is_refused_not_rendered() -> None:
    """Each pod's hostname is its service host: one [DEFAULT] host would merge the replicas' rows."""
    with pytest.raises(novaconf.ConfigError, match=r"host is managed via .* one service row"):
        novaconf.nova_conf(_base(extra_config={"DEFAULT": {"host": "nova"}}))


@pytest.mark.parametrize(
    "extra",
    [{"DEFAULT": {"k": "a\nb"}}, {"DEFAULT": {"k\r": "v"}}, {"bad\nsection": {"k": "v"}}],
)
def test_a_newline_in_a_merged_section_is_a_config_error(extra: dict[str, dict[str, str]]) -> None:
    with pytest.raises(novaconf.ConfigError):
        novaconf.nova_conf(_base(extra_config=extra))


def test_a_newline_in_a_typed_value_fails_the_compute_fragment_too() -> None:
    with pytest.raises(novaconf.ConfigError):
        novaconf.render_compute_fragment(_base(region="a\nb"))


def test_the_owned_key_registry_covers_every_key_the_operator_renders() -> None:
    inputs = _base(
        region="r",
        cinder_enabled=True,
        barbican_enabled=True,
        cinder_override="http://c",
        barbican_override="http://b",
        placement_override="http://p",
        neutron_override="http://n",
        glance_override="http://g",
        per_logger_levels={"amqp": "ERROR"},
        log_format="json",
        cache_servers="m:11211",
    )
    not_owned = {("api_database", "connection"), ("database", "connection")}
    for section, options in novaconf.nova_conf_sections(inputs).items():
        for key in options:
            if (section, key) not in not_owned:
                assert key in novaconf.OWNED_KEYS.get(section, ()), (section, key)


def test_the_remote_fragment_is_readdressed(load_sample: Callable[[str], Nova]) -> None:
    nova = load_sample("full")
    inputs = novaconf.conf_inputs(nova)
    local = novaconf.compute_fragment_sections(inputs)
    remote = novaconf.compute_fragment_sections(inputs, remote=_remote(nova))
    for section in ("keystone_authtoken", "service_user", "placement", "neutron", "cinder"):
        assert remote[section]["auth_url"] == "https://keystone.example.org/v3"
    assert remote["barbican"]["auth_endpoint"] == "https://keystone.example.org/v3"
    assert (
        remote["keystone_authtoken"]["www_authenticate_uri"]
        == local["keystone_authtoken"]["www_authenticate_uri"]
    )
    assert remote["cinder"]["catalog_info"] == "block-storage:cinder:publicURL"
    assert remote["barbican"]["barbican_endpoint_type"] == "public"
    for section in ("placement", "neutron", "glance"):
        assert remote[section]["valid_interfaces"] == "public"
        assert "endpoint_override" not in remote[section]
    assert "endpoint_template" not in remote["cinder"]
    assert "barbican_endpoint" not in remote["barbican"]
    for section in ("oslo_messaging_rabbit", "vnc", "upgrade_levels", "DEFAULT"):
        assert remote[section] == local[section]


def test_the_fragment_never_carries_control_plane_only_keys(nova: Nova) -> None:
    sections = novaconf.compute_fragment_sections(novaconf.conf_inputs(nova))
    for absent in ("database", "api_database", "api", "cache", "scheduler", "conductor", "oslo_concurrency"):
        assert absent not in sections
    assert "filter_scheduler" not in sections
    assert set(sections["DEFAULT"]) == {"use_stderr", "debug"}
    assert "memcached_servers" not in sections["keystone_authtoken"]
    assert "service_metadata_proxy" not in sections["neutron"]


def test_rendering_is_deterministic_and_does_not_mutate_the_cr(nova: Nova) -> None:
    before = copy.deepcopy(nova.model_dump(by_alias=True))
    first = novaconf.config_data(novaconf.conf_inputs(nova))
    second = novaconf.config_data(novaconf.conf_inputs(nova))
    assert first == second
    assert nova.model_dump(by_alias=True) == before


def test_the_bytes_do_not_depend_on_the_release(nova: Nova) -> None:
    other = nova.model_copy(deep=True)
    other.spec.open_stack_release = "2026.2" if nova.spec.open_stack_release != "2026.2" else "2025.2"
    assert novaconf.config_data(novaconf.conf_inputs(other)) == novaconf.config_data(
        novaconf.conf_inputs(nova)
    )


def test_the_config_is_rendered_once_per_distinct_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    rendered: list[str] = []
    render_data = novaconf._config_data

    def counting(inputs: ConfInputs) -> dict[str, str]:
        rendered.append(inputs.name)
        return render_data(inputs)

    monkeypatch.setattr(novaconf, "_config_data", counting)
    monkeypatch.setattr(novaconf, "_CONFIGS", novaconf._Rendered(size=2))
    a = ConfInputs(name="a", namespace="ns", keystone_endpoint="http://ks:5000/v3")
    first = novaconf.config_data(a)
    first["nova.conf"] = "changed by the caller"  # each call hands out a dict of its own
    again = novaconf.config_data(dataclasses.replace(a))  # equal inputs, another object
    assert rendered == ["a"]
    assert again == render_data(a)
    debug = dataclasses.replace(a, debug=True)
    assert novaconf.config_data(debug)["nova.conf"] != again["nova.conf"]  # any field counts
    extra = dataclasses.replace(a, extra_config={"DEFAULT": {"x": "1"}})
    assert "x = 1" in novaconf.config_data(extra)["nova.conf"]
    assert rendered == ["a", "a", "a"]
    novaconf.config_data(a)  # the oldest of three went (size 2): rendered again
    assert rendered == ["a", "a", "a", "a"]


def test_a_config_error_is_raised_on_every_call() -> None:
    bad = ConfInputs(
        name="a",
        namespace="ns",
        keystone_endpoint="http://ks:5000/v3",
        extra_config={"DEFAULT": {"x": "1\n2"}},
    )
    for _ in range(2):
        with pytest.raises(novaconf.ConfigError):
            novaconf.config_data(bad)


def test_the_compute_fragment_is_rendered_once_per_inputs_and_remote_address() -> None:
    a = ConfInputs(name="a", namespace="ns", keystone_endpoint="http://ks:5000/v3")
    local = novaconf.render_compute_fragment(a)
    remote = novaconf.render_compute_fragment(a, remote=RemoteComputeInputs("https://ks.example.org/v3"))
    assert local != remote
    assert novaconf.render_compute_fragment(a) == local
    assert "https://ks.example.org/v3" in novaconf.render_compute_fragment(
        a, remote=RemoteComputeInputs("https://ks.example.org/v3")
    )
