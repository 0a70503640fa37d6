"""``spec.secretConfig`` of a Nova or a NovaCompute: options nova marks secret, never in a ConfigMap.

``extraConfig`` lands in a ConfigMap, which anyone with ``view`` can read, so the Config steps
refuse the options nova's own registry marks secret (``[database] slave_connection``, ``[vault]
root_token_id`` ...; the catalogs record the flag). Their way in is a Secret named by
``spec.secretConfig.secretRef`` whose keys are ``section.option``: each key is checked against
the release's catalog (``catalog.secret_config_problems``: an option nova knows, not one the
operator sets), each value is put in oslo.config's literal form, and the result is published as
a derived Secret the pods read as ``OS_<SECTION>__<OPTION>`` variables. The keyed digest of the
values (``values_digest``) is a pod-template annotation, so a rotation rolls the pods.

The Nova's side is in ``reconcilers/secrets.py``, the pool's in ``reconcilers/compute/pool_config.py``.
Messages name the Secret and its keys, never a value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from nova_operator.digests import keyed_digest

__all__ = ["COMPUTE_MANAGED", "SECRET_CONFIG_INVALID", "WAITING_FOR_SECRET_CONFIG", "values_digest"]

WAITING_FOR_SECRET_CONFIG: Final = "WaitingForSecretConfig"
SECRET_CONFIG_INVALID: Final = "SecretConfigInvalid"

#: What the pool DaemonSet's environment sets from the compute contract: never from secretConfig.
COMPUTE_MANAGED: Final = frozenset(
    {("DEFAULT", "transport_url"), ("DEFAULT", "host"), ("DEFAULT", "my_ip")}
    | {(s, "password") for s in ("keystone_authtoken", "service_user", "placement", "neutron", "cinder")}
    | {("vnc", "server_proxyclient_address"), ("libvirt", "live_migration_inbound_addr")}
    | {("neutron", "metadata_proxy_shared_secret")}
)


def values_digest(data: Mapping[str, str], key: bytes) -> str:
    """The keyed digest of the published ``section.option`` values (the pods' annotation)."""
    return keyed_digest(json.dumps(dict(data), sort_keys=True, separators=(",", ":")), key)
