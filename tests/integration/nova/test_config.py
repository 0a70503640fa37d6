"""The Config step (``reconcile_config``) on the real API server: an option nova marks secret is
refused in ``extraConfig`` (issue 26 item 6), a deprecated one is warned about once; ``spec.policy``
rule names are checked against the release's policy rules, from the map or a ConfigMap (issue 38
item 3).

Each pass runs in ``make_ctx`` over a Nova stored by kube-apiserver; the ConfigMap it writes is
stored there, and the next pass's cache holds the server's copy. Requests are recorded by a wrapper
around the real client (``Recorder``); events by ``Emitted``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from nova_operator import catalog, conditions
from nova_operator.kube import Kube
from nova_operator.kube.errors import Invalid
from nova_operator.kube.resources import CONFIGMAPS, NOVAS
from nova_operator.kube.types import Object
from nova_operator.metrics import WRITE_VERBS
from nova_operator.reconcilers.nova import config
from nova_operator.reconcilers.nova.context import PassContext
from tests.integration.nova.passes import ALL_SECRETS, Emitted, make_ctx, put, stored, stored_nova
from tests.integration.nova.requests import Recorder

DEPRECATED = {"DEFAULT": {"logdir": "/var/log/nova", "backdoor_port": "0"}}


async def test_the_config_step_refuses_a_secret_option_and_names_the_secret_backed_way(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    # The Nova CRD refuses such a Nova (its CEL rule lists every option a shipped catalog marks
    # secret): the pass reads one stored before that rule, as the cache would hold it.
    stored_one = await stored_nova(admin, namespace)
    nova = {
        **stored_one,
        "spec": {**stored_one["spec"], "extraConfig": {"vault": {"root_token_id": "s.t0ken"}}},
    }
    with pytest.raises(Invalid, match="must not set an option nova marks secret"):
        await admin.patch(NOVAS, "nova", {"spec": {"extraConfig": nova["spec"]["extraConfig"]}}, namespace)
    ctx = make_ctx(ours, nova)
    await config.reconcile_config(ctx)
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "ConfigError")
    assert "spec.extraConfig[vault][root_token_id]: nova marks this option secret" in c["message"]
    assert "key vault.root_token_id of the Secret named by spec.secretConfig.secretRef" in c["message"]
    assert "s.t0ken" not in c["message"]
    assert [c for c in ours.calls if c[0] in WRITE_VERBS] == []  # no ConfigMap carries it
    assert (await admin.list(CONFIGMAPS, namespace))["items"] == []


def warnings_of(events: Emitted) -> list[str]:
    return [m for t, r, m in events.emitted if (t, r) == ("Warning", "ExtraConfigWarning")]


async def test_the_config_step_warns_once_when_the_config_with_a_deprecated_option_is_written(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    events = Emitted()
    nova = await stored_nova(admin, namespace, extraConfig=DEPRECATED)
    inputs = await stored(admin, namespace, *ALL_SECRETS)
    ctx = make_ctx(ours, nova, *inputs, events=events)
    await config.reconcile_config(ctx)
    assert warnings_of(events) == catalog.admission_warnings("2025.2", DEPRECATED)
    assert ctx.state.config_map  # a warning does not stop the config
    # the next pass finds the ConfigMap written: no second warning
    written = await admin.get(CONFIGMAPS, ctx.state.config_map, namespace)
    ctx = make_ctx(ours, nova, *inputs, written, events=events)
    await config.reconcile_config(ctx)
    assert len(warnings_of(events)) == 2


# -- spec.policy (issue 38 item 3) --------------------------------------------------------------

SERVERS_CREATE = "os_compute_api:servers:create"


async def test_a_policy_rule_the_release_does_not_register_is_refused_by_its_name(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    events = Emitted()
    rules = {SERVERS_CREATE: "role:admin", "os_compute_api:servers:crate": "role:admin"}
    nova = await stored_nova(admin, namespace, policy={"rules": rules})  # the CRD checks the shape only
    ctx = make_ctx(ours, nova, *await stored(admin, namespace, *ALL_SECRETS), events=events)
    await config.reconcile_config(ctx)
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "ConfigError")
    assert (
        c["message"] == "spec.policy.rules[os_compute_api:servers:crate]: no such policy rule in nova 2025.2"
    )
    assert [(t, r) for t, r, _ in events.emitted] == [("Warning", "ConfigError")]
    assert ctx.state.policy_held == (c["message"],)  # an upgrade would not start either
    assert (await admin.list(CONFIGMAPS, namespace))["items"] == []  # nothing half-written


async def test_known_policy_rules_reach_the_config_map_as_policy_yaml(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace, policy={"rules": {SERVERS_CREATE: "role:admin"}})
    ctx = make_ctx(ours, nova, *await stored(admin, namespace, *ALL_SECRETS))
    await config.reconcile_config(ctx)
    written = await admin.get(CONFIGMAPS, ctx.state.policy_map, namespace)
    assert ctx.state.policy_map.startswith("nova-policy-")
    assert yaml.safe_load(written["data"]["policy.yaml"]) == {SERVERS_CREATE: "role:admin"}
    assert "policy_file = /etc/nova/policy-override/policy.yaml" in written["data"]["policy.conf"]
    config_keys = (await admin.get(CONFIGMAPS, ctx.state.config_map, namespace))["data"]
    assert not {"policy.conf", "policy.yaml"} & set(config_keys)  # every role mounts that one
    assert ctx.state.policy_held == ()


def _policy_map(text: str, name: str = "nova-policy", key: str = "policy.yaml") -> Object:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {key: text}}


async def test_a_policy_config_map_is_read_checked_and_a_change_renders_another_config(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    ref = {"configMapRef": {"name": "nova-policy"}}
    nova = await stored_nova(admin, namespace, policy=ref)
    inputs = await stored(admin, namespace, *ALL_SECRETS)
    source = "spec.policy.configMapRef (ConfigMap nova-policy, key policy.yaml)"

    async def one_pass() -> tuple[PassContext, Mapping[str, Any]]:
        ctx = make_ctx(ours, nova, *inputs)
        await config.reconcile_config(ctx)
        c = ctx.condition(conditions.SECRETS_READY)
        return ctx, c or {}

    _, c = await one_pass()
    assert c["message"] == f"{source}: the ConfigMap does not exist in namespace {namespace}"
    await put(admin, CONFIGMAPS, _policy_map("x: y", key="other.yaml"), namespace)
    _, c = await one_pass()
    assert c["message"] == f"{source}: the ConfigMap has no key policy.yaml"
    await admin.delete(CONFIGMAPS, "nova-policy", namespace)
    await put(admin, CONFIGMAPS, _policy_map('"os_compute_api:servers:crate": "role:admin"\n'), namespace)
    _, c = await one_pass()
    assert c["message"] == f"{source}[os_compute_api:servers:crate]: no such policy rule in nova 2025.2"

    await admin.patch(
        CONFIGMAPS, "nova-policy", {"data": {"policy.yaml": f'"{SERVERS_CREATE}": "role:admin"\n'}}, namespace
    )
    first, c = await one_pass()
    assert c.get("reason") != "ConfigError"
    data = (await admin.get(CONFIGMAPS, first.state.policy_map, namespace))["data"]
    assert yaml.safe_load(data["policy.yaml"]) == {SERVERS_CREATE: "role:admin"}
    await admin.patch(
        CONFIGMAPS,
        "nova-policy",
        {"data": {"policy.yaml": f'"{SERVERS_CREATE}": "rule:admin_api"\n'}},
        namespace,
    )
    second, _ = await one_pass()
    # another content-addressed policy ConfigMap: the API and metadata Deployments that mount it roll;
    # the config ConfigMap (every role's and db-sync's) stays
    assert second.state.policy_map != first.state.policy_map
    assert second.state.config_map == first.state.config_map
    data = (await admin.get(CONFIGMAPS, second.state.policy_map, namespace))["data"]
    assert yaml.safe_load(data["policy.yaml"]) == {SERVERS_CREATE: "rule:admin_api"}
