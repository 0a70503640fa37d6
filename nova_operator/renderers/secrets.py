"""The derived Secrets: the two pymysql DSNs, the ``rabbit://`` transport URL, the compute contracts.

Pure: the credential values are inputs (the Secrets step reads them); nothing here reads
the cluster.  These are the only renderers whose output carries credentials, and only in
Secret ``data``.  Messages never quote a URL or a DSN (they carry passwords).

Every value here reaches nova through oslo.config (``OS_<SECTION>__<KEY>`` environment
overrides), which expands ``$name`` in every value and turns ``\\$`` into ``$``. So a
credential is handed over in oslo.config's form: inside a URL (DSNs, transport URLs) a ``$``
is percent-encoded (``%24``, which the URL parsers decode), and a plain value (the
service-user password, the metadata shared secret) has each ``$`` doubled (``oslo_value``) and
is published in ``{name}-oslo-credentials`` rather than read from the user's Secret as it is.
A plain value holding a backslash directly before a ``$`` has no oslo.config form at all:
``oslo_value`` refuses it (``CredentialNotRepresentable``) and the Secrets step says so.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import quote

from nova_operator import naming
from nova_operator.models.common import DatabaseSpec
from nova_operator.models.nova import Nova
from nova_operator.naming import CheckedCopy, Component
from nova_operator.renderers import oslo
from nova_operator.renderers.novaconf import CONTRACT_HTTPS_CA_KEY
from nova_operator.renderers.pod_env import DB_TLS_DIR
from nova_operator.renderers.workload import plain

__all__ = [
    "CredentialNotRepresentable",
    "TransportURLRejected",
    "broker_port",
    "check_transport_url",
    "checked_copy_secret",
    "compute_config_secret",
    "copy_secret",
    "database_dsn",
    "database_username",
    "digest_key_secret",
    "dsn_secret",
    "encode_userinfo",
    "managed_transport_url",
    "oslo_credentials_secret",
    "oslo_url",
    "oslo_value",
    "secret_config_data",
    "secret_config_secret",
    "shown_scheme",
    "transport_url_secret",
]

Block = Literal["api", "cell"]
_SAFE = "-_.~&+,;="  # not "$": oslo.config would expand it


class TransportURLRejected(ValueError):
    """The transport URL cannot fill the cell mapping template; the message never names the URL."""


class CredentialNotRepresentable(ValueError):
    """A plain credential that oslo.config cannot carry literally; the message names no value."""


def encode_userinfo(value: str) -> str:
    """Percent-encode everything but ``A-Z a-z 0-9`` and ``-_.~&+,;=`` (uppercase hex)."""
    return quote(value, safe=_SAFE)


def oslo_value(value: str) -> str:
    """``value`` as oslo.config must read it to yield ``value``: every ``$`` doubled.

    oslo.config first turns ``\\$`` into ``$$`` and then expands ``$name``; no string makes
    it yield a backslash followed by a dollar, so such a value is refused.
    """
    try:
        return oslo.literal(value)
    except oslo.NotRepresentable as exc:
        raise CredentialNotRepresentable(str(exc)) from None


def oslo_url(url: str) -> str:
    """A URL that oslo.config leaves alone: ``$`` percent-encoded (the URL parsers decode it)."""
    return url.replace("$", "%24")


def _name(nova: Nova) -> str:
    if not nova.metadata.name:
        raise ValueError("a Nova without metadata.name cannot be rendered")
    return nova.metadata.name


def _ns(nova: Nova) -> str:
    return nova.metadata.namespace or "default"


def _block(nova: Nova, which: Block) -> DatabaseSpec:
    return nova.spec.api_database if which == "api" else nova.spec.database


def instance_name(nova: Nova, which: Block) -> str:
    """The managed instance (MariaDB Database/User/Grant) name: ``{name}-api`` or ``{name}``."""
    return f"{_name(nova)}-api" if which == "api" else _name(nova)


def database_username(nova: Nova, which: Block, secret_username: str) -> str:
    """Static + managed: the instance name; brownfield or Dynamic: the Secret's ``username``."""
    block = _block(nova, which)
    if block.cluster_ref is not None and block.credentials_mode != "Dynamic":
        return instance_name(nova, which)
    return secret_username


def _tls_query(mode: str, directory: str) -> dict[str, str]:
    """The DSN keys of a ``tls.mode``, in the form SQLAlchemy's pymysql dialect hands to PyMySQL.

    The dialect gathers ``ssl_ca``, ``ssl_cert``, ``ssl_key`` and ``ssl_check_hostname`` into
    PyMySQL's ``ssl`` dict; PyMySQL then verifies the server against ``ca`` when one is named and
    checks its name unless ``check_hostname`` is false. Any other ``ssl_*`` key (the spec's
    ``ssl_verify_cert``/``ssl_verify_identity``) reaches PyMySQL as an argument of its own, which
    makes it build a new dict without the CA, the certificate and the key: verification against
    the system's CAs instead of the named one, no client certificate, no hostname check.

    - ``prefer``, ``require``: the client certificate and key, no CA (TLS without verification);
    - ``verify-ca``: and the CA, ``ssl_check_hostname=false`` (the chain, not the name);
    - ``verify-full``: and the CA (the chain and the name).

    PyMySQL uses TLS only when the server offers it and goes on in plaintext when it does not, in
    every mode: refusing a server without TLS is the server's part (``REQUIRE SSL``/``X509``).
    """
    if mode == "disabled":
        return {}
    query = {"ssl_cert": f"{directory}/tls.crt", "ssl_key": f"{directory}/tls.key"}
    if mode in ("verify-ca", "verify-full"):
        query["ssl_ca"] = f"{directory}/ca.crt"
    if mode == "verify-ca":
        query["ssl_check_hostname"] = "false"
    return query


def database_dsn(nova: Nova, which: Block, *, username: str, password: str) -> str:
    """``mysql+pymysql://<user>:<password>@<host>:<port>/<schema>?charset=utf8[&ssl_…]``.

    Spec §10.1, but for the TLS keys (``_tls_query``: each mode does what its name says)."""
    block = _block(nova, which)
    if not username or not password:
        raise ValueError(f"{which} database credentials are incomplete")
    port = block.port or 3306
    if block.cluster_ref is not None:
        host = f"{block.cluster_ref.name}.{_ns(nova)}.svc"
    elif block.host:
        host = block.host
    else:
        raise ValueError(f"{which} database names neither clusterRef nor host")
    query = {"charset": "utf8"}
    if block.tls is not None and block.tls.mode:
        query.update(_tls_query(block.tls.mode, DB_TLS_DIR[which]))
    user = database_username(nova, which, username)
    params = "&".join(f"{k}={v}" for k, v in sorted(query.items()))
    return f"mysql+pymysql://{encode_userinfo(user)}:{encode_userinfo(password)}@{host}:{port}/{block.database}?{params}"


def _secret(
    nova: Nova, name: str, data: Mapping[str, str], labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    return plain(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": name,
                "namespace": _ns(nova),
                "labels": dict(labels) if labels is not None else naming.common_labels(_name(nova)),
            },
            "data": {k: base64.b64encode(v.encode("utf-8")).decode("ascii") for k, v in sorted(data.items())},
        }
    )


def dsn_secret(nova: Nova, which: Block, dsn: str) -> dict[str, Any]:
    """``{name}-api-db-connection`` / ``{name}-db-connection`` with the single key ``connection``."""
    suffix = "api-db-connection" if which == "api" else "db-connection"
    return _secret(nova, f"{_name(nova)}-{suffix}", {"connection": dsn})


def managed_transport_url(*, username: str, password: str, host: str, port: int | str) -> str:
    """``rabbit://<user>:<pass>@<host>:<port>/`` (userinfo encoded, IPv6 host bracketed, root vhost)."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"rabbit://{encode_userinfo(username)}:{encode_userinfo(password)}@{host}:{port}/"


def check_transport_url(url: str) -> int:
    """The broker port of an acceptable transport URL; :class:`TransportURLRejected` otherwise.

    nova fills the cell mapping's ``{hostname}:{port}`` from this URL with ``urlparse``, which
    renders a missing port as ``None`` and drops IPv6 brackets; so the last host must name
    a port and no host may be an IPv6 literal.  Multi-host URLs pass on their last host.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise TransportURLRejected("the transport URL has no scheme")
    if scheme != "rabbit":
        raise TransportURLRejected(f"the transport URL scheme must be rabbit, not {shown_scheme(url)}")
    netloc = rest.split("/", 1)[0].split("?", 1)[0]
    hosts = [h.rpartition("@")[2] for h in netloc.split(",")]
    if not hosts or not hosts[-1]:
        raise TransportURLRejected("the transport URL names no host")
    if any(h.startswith("[") for h in hosts):
        raise TransportURLRejected(
            "the transport URL uses an IPv6 literal host, which the cell template drops"
        )
    host, colon, port = hosts[-1].rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise TransportURLRejected("the transport URL's last host names no explicit port")
    return int(port)


# Schemes a message may name: anything else before "://" may be part of a credential (a URL
# written without its scheme puts user and password there), so it is never echoed.
_KNOWN_SCHEMES = frozenset(
    {"amqp", "amqps", "http", "https", "kafka", "kombu", "pika", "qpid", "redis", "zmq", "ws", "wss", "mysql"}
)


def shown_scheme(url: str) -> str:
    """The scheme of ``url`` for a message: quoted when it is a well-known one, else ``none``/``unknown``."""
    scheme, sep, _ = url.partition("://")
    if not sep:
        return "none"
    return repr(scheme.lower()) if scheme.lower() in _KNOWN_SCHEMES else "an unknown scheme"


def broker_port(url: str) -> int:
    """The port of the transport URL's last host, 5672 when it names none (the probe input)."""
    try:
        return check_transport_url(url)
    except TransportURLRejected:
        return 5672


def transport_url_secret(nova: Nova, url: str) -> dict[str, Any]:
    """``{name}-transport-url`` with the single key ``transport_url`` (``$`` percent-encoded)."""
    return _secret(nova, f"{_name(nova)}-transport-url", {"transport_url": oslo_url(url)})


def digest_key_secret(nova: Nova, key: str) -> dict[str, Any]:
    """``{name}-digest-key``: the HMAC key of the credential digests in pod-template annotations
    (key ``key``; generated once by the Secrets step, never rotated by the operator)."""
    return _secret(nova, naming.digest_key_secret(_name(nova)), {"key": key})


def oslo_credentials_secret(nova: Nova, *, password: str, metadata_secret: str) -> dict[str, Any]:
    """``{name}-oslo-credentials``: the service-user password and the metadata shared secret in
    oslo.config form (keys ``password`` and ``metadata_proxy_shared_secret``), what the control
    plane's ``OS_*__PASSWORD`` and ``OS_NEUTRON__METADATA_PROXY_SHARED_SECRET`` read."""
    data = {"password": oslo_value(password), "metadata_proxy_shared_secret": oslo_value(metadata_secret)}
    return _secret(nova, f"{_name(nova)}-oslo-credentials", data)


def secret_config_data(values: Mapping[tuple[str, str], str]) -> dict[str, str]:
    """``spec.secretConfig`` as published: key ``section.option``, value in oslo.config form.

    Raises ``CredentialNotRepresentable`` naming the key (never the value) for a value with a
    backslash before a ``$``.
    """
    data: dict[str, str] = {}
    for (section, option), value in sorted(values.items()):
        try:
            data[f"{section}.{option}"] = oslo_value(value)
        except CredentialNotRepresentable as exc:
            raise CredentialNotRepresentable(f"key {section}.{option} {exc}") from None
    return data


def secret_config_secret(nova: Nova, data: Mapping[str, str]) -> dict[str, Any]:
    """``{name}-secret-config``: ``secret_config_data``, what the pods' ``OS_<SECTION>__<OPTION>`` read."""
    return _secret(nova, naming.secret_config_secret(_name(nova)), data)


def checked_copy_secret(nova: Nova, which: CheckedCopy, data: Mapping[str, str]) -> dict[str, Any]:
    """``naming.checked_copy``: what the pods mount of the Secrets the spec names (``--secret-ref-label``),
    copied while they carry the label. ``data`` is base64 as the sources hold it (never decoded here)."""
    name = naming.checked_copy(_name(nova), which)
    return copy_secret(name, _ns(nova), naming.common_labels(_name(nova)), data)


def copy_secret(
    name: str, namespace: str, labels: Mapping[str, str], data: Mapping[str, str]
) -> dict[str, Any]:
    """A label-checked copy named ``name`` (a Nova's or a pool's): ``data`` base64 as the sources hold
    it (``pod_env.copied_data``)."""
    return plain(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "data": dict(sorted(data.items())),
        }
    )


def compute_config_secret(
    nova: Nova,
    *,
    fragment: str,
    transport_url: str,
    password: str,
    metadata_secret: str,
    ca_crt: str | None = None,
    https_ca: str | None = None,
    client_cert: tuple[str, str] | None = None,
    remote: bool = False,
) -> dict[str, Any]:
    """The compute contract ``{name}-compute-config`` (or ``{name}-remote-compute-config``).

    Keys: ``nova-compute.conf``, ``transport_url``, ``password``, ``metadata_proxy_shared_secret``,
    ``cell_name`` (``cell1``), ``ca.crt`` only on a TLS bus, ``tls.crt`` and ``tls.key`` (the
    ``client_cert`` pair, which the fragment's ``ssl_cert_file`` and ``ssl_key_file`` name) only under
    ``spec.messaging.tls.clientCertSecretRef``, and ``https-ca.crt`` (the CA bundle the fragment names
    as ``cafile``) only while ``spec.tls`` is set. The credentials are in the form nova-compute's
    oslo.config reads them (``oslo_url``, ``oslo_value``): they arrive literally.
    """
    name = _name(nova)
    component = Component.REMOTE_COMPUTE_CONFIG if remote else Component.COMPUTE_CONFIG
    data = {
        "nova-compute.conf": fragment,
        "transport_url": oslo_url(transport_url),
        "password": oslo_value(password),
        "metadata_proxy_shared_secret": oslo_value(metadata_secret),
        "cell_name": "cell1",
    }
    if nova.spec.messaging.tls is not None:
        if not ca_crt:
            raise ValueError("the broker CA bundle is required while spec.messaging.tls is set")
        data["ca.crt"] = ca_crt
        if nova.spec.messaging.tls.client_cert_secret_ref is not None:
            if client_cert is None or not all(client_cert):
                raise ValueError("the bus client certificate is required while clientCertSecretRef is set")
            data["tls.crt"], data["tls.key"] = client_cert
    if nova.spec.tls is not None:
        if not https_ca:
            raise ValueError("the HTTPS CA bundle is required while spec.tls is set")
        data[CONTRACT_HTTPS_CA_KEY] = https_ca
    return _secret(nova, f"{name}-{component}", data, naming.labels(name, component))
