from __future__ import annotations

import pytest

from nova_operator import cli, controllers
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.settings import OpenStackSettings, Settings, WatchSettings


def test_every_controller_is_registered() -> None:
    assert len(controllers.factories()) == 2  # Nova and NovaCompute


def test_nova_api_url_defaults_to_the_in_cluster_service_and_can_be_pointed_elsewhere() -> None:
    assert Settings().openstack.nova_api_url_for("nova", "openstack") == (
        "http://nova.openstack.svc.cluster.local:8774"
    )
    settings = cli.parse_settings(["--nova-api-url", "http://127.0.0.1:9774/{namespace}/{name}"])
    assert settings.openstack == OpenStackSettings("http://127.0.0.1:9774/{namespace}/{name}")
    assert settings.openstack.nova_api_url_for("nova", "openstack") == "http://127.0.0.1:9774/openstack/nova"


@pytest.mark.parametrize("bad", ["http://{host}:8774", "ftp://x/{name}", "{0}"])
def test_a_bad_nova_api_url_is_a_usage_error(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.parse_settings(["--nova-api-url", bad])
    assert exc.value.code == 2
    assert "--nova-api-url" in capsys.readouterr().err


def test_a_namespace_scoped_install_sets_the_option_and_a_cluster_wide_one_does_not() -> None:
    scoped = controllers.with_settings(
        NovaOptions(), Settings(watch=WatchSettings(namespaces=("openstack",)))
    )
    assert scoped.namespaced is True
    assert controllers.with_settings(NovaOptions(), Settings()).namespaced is False
