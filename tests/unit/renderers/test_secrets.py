"""Derived Secrets: the pymysql DSNs, the transport URL and its checks, the compute contracts."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

from nova_operator.models.nova import Nova
from nova_operator.renderers import secrets

Load = Callable[[str], Nova]


def _decoded(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def test_managed_static_dsn_uses_the_instance_name_and_the_cluster_service(load_sample: Load) -> None:
    nova = load_sample("minimal")
    assert secrets.database_dsn(nova, "api", username="ignored", password="pw") == (
        "mysql+pymysql://nova-api:pw@mariadb.openstack.svc:3306/nova_api?charset=utf8"
    )
    assert secrets.database_dsn(nova, "cell", username="ignored", password="pw") == (
        "mysql+pymysql://nova:pw@mariadb.openstack.svc:3306/nova?charset=utf8"
    )


def test_brownfield_dsn_uses_the_secret_username_the_host_and_tls_files(load_sample: Load) -> None:
    nova = load_sample("full")
    assert secrets.database_dsn(nova, "api", username="u@x", password="p:w/d%") == (
        "mysql+pymysql://u%40x:p%3Aw%2Fd%25@db.example.org:3307/nova_api?charset=utf8"
        "&ssl_ca=/etc/nova-db-tls/api/ca.crt&ssl_cert=/etc/nova-db-tls/api/tls.crt"
        "&ssl_key=/etc/nova-db-tls/api/tls.key"
    )
    # require: the client certificate and key, no CA (nothing to verify against)
    assert secrets.database_dsn(nova, "cell", username="u", password="p").endswith(
        "/nova?charset=utf8&ssl_cert=/etc/nova-db-tls/cell/tls.crt&ssl_key=/etc/nova-db-tls/cell/tls.key"
    )


TLS_QUERIES = {
    None: "charset=utf8",
    "disabled": "charset=utf8",
    "prefer": "charset=utf8&ssl_cert=/etc/nova-db-tls/cell/tls.crt&ssl_key=/etc/nova-db-tls/cell/tls.key",
    "require": "charset=utf8&ssl_cert=/etc/nova-db-tls/cell/tls.crt&ssl_key=/etc/nova-db-tls/cell/tls.key",
    "verify-ca": "charset=utf8&ssl_ca=/etc/nova-db-tls/cell/ca.crt&ssl_cert=/etc/nova-db-tls/cell/tls.crt"
    "&ssl_check_hostname=false&ssl_key=/etc/nova-db-tls/cell/tls.key",
    "verify-full": "charset=utf8&ssl_ca=/etc/nova-db-tls/cell/ca.crt&ssl_cert=/etc/nova-db-tls/cell/tls.crt"
    "&ssl_key=/etc/nova-db-tls/cell/tls.key",
}


@pytest.mark.parametrize("mode", list(TLS_QUERIES))
def test_each_tls_mode_renders_the_keys_sqlalchemy_hands_to_pymysql_whole(
    load_sample: Load, mode: str | None
) -> None:
    """No ``ssl_verify_cert``/``ssl_verify_identity``: PyMySQL drops the CA, certificate and key for them.

    Verification is the CA's presence (PyMySQL verifies against it, and only then); the hostname
    check is PyMySQL's default with a CA, off only by ``ssl_check_hostname=false``.
    """
    nova = load_sample("full").model_copy(deep=True)
    assert nova.spec.database.tls is not None
    nova.spec.database.tls = nova.spec.database.tls.model_copy(update={"mode": mode})
    dsn = secrets.database_dsn(nova, "cell", username="u", password="p")
    assert dsn == f"mysql+pymysql://u:p@db.example.org:3307/nova?{TLS_QUERIES[mode]}"
    assert "ssl_verify" not in dsn


def test_dynamic_credentials_use_the_secret_username(load_sample: Load) -> None:
    nova = load_sample("minimal")
    nova = nova.model_copy(deep=True)
    nova.spec.database.credentials_mode = "Dynamic"
    assert secrets.database_dsn(nova, "cell", username="v-token-123", password="pw").startswith(
        "mysql+pymysql://v-token-123:pw@"
    )


def test_userinfo_encoding_keeps_the_sub_delims_but_dollar() -> None:
    assert secrets.encode_userinfo("aZ09-_.~&+,;=") == "aZ09-_.~&+,;="
    assert secrets.encode_userinfo("a$b") == "a%24b"  # oslo.config would expand "$b"
    assert secrets.encode_userinfo("a b:c@d/e?f#g%h!") == "a%20b%3Ac%40d%2Fe%3Ff%23g%25h%21"


def test_empty_credentials_never_make_a_dsn(load_sample: Load) -> None:
    with pytest.raises(ValueError, match="incomplete"):
        secrets.database_dsn(load_sample("minimal"), "api", username="u", password="")


def test_dsn_and_transport_secrets_hold_one_key(load_sample: Load) -> None:
    nova = load_sample("minimal")
    api = secrets.dsn_secret(nova, "api", "dsn-a")
    cell = secrets.dsn_secret(nova, "cell", "dsn-c")
    url = secrets.transport_url_secret(nova, "rabbit://u:p@h:5672/")
    assert (api["metadata"]["name"], _decoded(api)) == ("nova-api-db-connection", {"connection": "dsn-a"})
    assert (cell["metadata"]["name"], _decoded(cell)) == ("nova-db-connection", {"connection": "dsn-c"})
    assert (url["metadata"]["name"], _decoded(url)) == (
        "nova-transport-url",
        {"transport_url": "rabbit://u:p@h:5672/"},
    )
    assert api["type"] == "Opaque"


def test_managed_transport_url() -> None:
    assert secrets.managed_transport_url(
        username="u s", password="p@ss", host="rabbit.ns.svc", port=5672
    ) == ("rabbit://u%20s:p%40ss@rabbit.ns.svc:5672/")
    assert secrets.managed_transport_url(username="u", password="p", host="fd00::1", port="5671") == (
        "rabbit://u:p@[fd00::1]:5671/"
    )


@pytest.mark.parametrize(
    ("url", "port"),
    [
        ("rabbit://u:p@host:5672/", 5672),
        ("rabbit://u:p@a:5671,u:p@b:5673/vhost?ssl=1", 5673),
        ("rabbit://u:p@a,u:p@b:5672/", 5672),
    ],
)
def test_acceptable_transport_urls_give_the_last_hosts_port(url: str, port: int) -> None:
    assert secrets.check_transport_url(url) == port


@pytest.mark.parametrize(
    "url",
    [
        "rabbit://u:secretpw@host/",
        "rabbit://u:secretpw@[fd00::1]:5672/",
        "rabbit://u:secretpw@a:5672,u:secretpw@b/",
        "amqp://u:secretpw@host:5672/",
        "host:5672",
    ],
)
def test_rejected_transport_urls_never_name_the_url(url: str) -> None:
    with pytest.raises(secrets.TransportURLRejected) as err:
        secrets.check_transport_url(url)
    assert "secretpw" not in str(err.value)
    assert secrets.broker_port(url) == 5672


def test_compute_contract_keys_and_labels(load_sample: Load) -> None:
    nova = load_sample("minimal")
    secret = secrets.compute_config_secret(
        nova, fragment="[DEFAULT]\n", transport_url="rabbit://x", password="pw", metadata_secret="ms"
    )
    assert secret["metadata"]["name"] == "nova-compute-config"
    assert secret["metadata"]["labels"]["app.kubernetes.io/component"] == "compute-config"
    assert _decoded(secret) == {
        "cell_name": "cell1",
        "metadata_proxy_shared_secret": "ms",
        "nova-compute.conf": "[DEFAULT]\n",
        "password": "pw",
        "transport_url": "rabbit://x",
    }


def test_remote_contract_carries_the_ca_on_a_tls_bus(load_sample: Load) -> None:
    nova = load_sample("full")
    kwargs: dict[str, Any] = {"fragment": "f", "transport_url": "t", "password": "p", "metadata_secret": "m"}
    secret = secrets.compute_config_secret(nova, ca_crt="CA", remote=True, **kwargs)
    assert secret["metadata"]["name"] == "nova-remote-compute-config"
    assert secret["metadata"]["labels"]["app.kubernetes.io/component"] == "remote-compute-config"
    assert _decoded(secret)["ca.crt"] == "CA"
    with pytest.raises(ValueError, match="CA bundle"):
        secrets.compute_config_secret(nova, **kwargs)
