"""The Config step (``reconcile_config``) on the real API server: an option nova marks secret is
refused in ``extraConfig`` (issue 26 item 6), a deprecated one is warned about once.

Each pass runs in ``make_ctx`` over a Nova stored by kube-apiserver; the ConfigMap it writes is
stored there, and the next pass's cache holds the server's copy. Requests are recorded by a wrapper
around the real client (``Recorder``); events by ``Emitted``.
"""

from __future__ import annotations

import pytest

from nova_operator import catalog, conditions
from nova_operator.kube import Kube
from nova_operator.kube.errors import Invalid
from nova_operator.kube.resources import CONFIGMAPS, NOVAS
from nova_operator.metrics import WRITE_VERBS
from nova_operator.reconcilers.nova import config
from tests.integration.nova.passes import ALL_SECRETS, Emitted, make_ctx, stored, stored_nova
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
