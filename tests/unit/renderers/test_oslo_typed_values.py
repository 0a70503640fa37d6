"""Issue 26 item 10: typed fields reach nova literally through the real oslo.config.

A CR's typed strings (service-user names, region, endpoints, cache servers) are rendered into
nova.conf, the compute contract's ``nova-compute.conf`` and ``compute-pool.conf``. oslo.config
expands ``$name`` in every value it reads, so unescaped, ``serviceUser.username:
${libvirt.rbd_secret_uuid}`` made nova-compute authenticate as a pool owner's option value and
``region: Region$One`` stopped the config from loading. Each release's oslo.config (in its nova
venv, ``fixtures/oslo_file_probe.py``) must read every typed value exactly as written, while
``extraConfig`` (oslo.config text) and the operator's own ``$my_ip`` keep expanding.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nova_operator.models.nova import Nova
from nova_operator.models.novacompute import NovaCompute
from nova_operator.renderers import compute_pool, novaconf, secrets

PROBE = Path(__file__).parent / "fixtures" / "oslo_file_probe.py"
ENV_PROBE = Path(__file__).parent / "fixtures" / "oslo_probe.py"

TYPED = {
    "username": "${libvirt.rbd_secret_uuid}",
    "project_name": "svc$proj",
    "user_domain_name": "$$dom",
    "project_domain_name": "tail$",
    "region": "Region$One",
    "keystone": "http://keystone.example.org:5000/v3?$x",
    "remote_keystone": "https://keystone.example.net/v3/$DEFAULT.host",
    "cache": "mc-$a:11211",
}


def _nova(load_sample: Any) -> Nova:
    raw = load_sample("full").model_dump(by_alias=True, exclude_none=True, mode="json")
    spec = raw["spec"]
    spec["serviceUser"].update(
        username=TYPED["username"],
        projectName=TYPED["project_name"],
        userDomainName=TYPED["user_domain_name"],
        projectDomainName=TYPED["project_domain_name"],
    )
    spec["region"] = TYPED["region"]
    spec["keystoneEndpoint"] = TYPED["keystone"]
    spec["cache"] = {"servers": [TYPED["cache"]]}
    spec["remoteCompute"]["keystoneEndpoint"] = TYPED["remote_keystone"]
    spec["extraConfig"] = {"DEFAULT": {"my_block_storage_ip": "h-$my_ip"}}
    return Nova.model_validate(raw)


def _pool() -> NovaCompute:
    return NovaCompute.model_validate(
        {
            "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
            "kind": "NovaCompute",
            "metadata": {"name": "rack7", "namespace": "openstack", "uid": "u1"},
            "spec": {
                "novaRef": {"name": "nova"},
                "nodeSelector": {"pool": "rack7"},
                "extraConfig": {"libvirt": {"rbd_secret_uuid": "pool-owner-value"}},
            },
        }
    )


def _cases(nova: Nova) -> list[dict[str, Any]]:
    inputs = novaconf.conf_inputs(nova)
    remote = novaconf.RemoteComputeInputs(keystone_endpoint=TYPED["remote_keystone"])
    pool_conf = compute_pool.pool_conf(_pool())
    return [
        {"files": {"nova.conf": novaconf.nova_conf(inputs)}, "auth_url": TYPED["keystone"]},
        {
            "files": {"nova-compute.conf": novaconf.render_compute_fragment(inputs), "pool.conf": pool_conf},
            "auth_url": TYPED["keystone"],
        },
        {
            "auth_url": TYPED["remote_keystone"],
            "files": {
                "nova-compute.conf": novaconf.render_compute_fragment(inputs, remote=remote),
                "pool.conf": pool_conf,
            },
        },
    ]


def _expected(auth_url: str, *, cache: bool) -> dict[str, str]:
    want = {}
    for section in ("service_user", "placement", "neutron"):
        want |= {
            f"{section}.username": TYPED["username"],
            f"{section}.project_name": TYPED["project_name"],
            f"{section}.user_domain_name": TYPED["user_domain_name"],
            f"{section}.project_domain_name": TYPED["project_domain_name"],
            f"{section}.auth_url": auth_url,
        }
    want |= {
        "keystone_authtoken.username": TYPED["username"],
        "keystone_authtoken.region_name": TYPED["region"],
        "glance.region_name": TYPED["region"],
        "neutron.region_name": TYPED["region"],
    }
    if cache:  # nova.conf only; the compute fragments render no cache
        want |= {
            "cache.memcache_servers": TYPED["cache"],
            "keystone_authtoken.memcached_servers": TYPED["cache"],
        }
    return want


def test_typed_values_are_doubled_and_extra_config_is_not(load_sample: Any) -> None:
    text = novaconf.nova_conf(novaconf.conf_inputs(_nova(load_sample)))
    assert "username = $${libvirt.rbd_secret_uuid}\n" in text
    assert "region_name = Region$$One\n" in text
    assert "user_domain_name = $$$$dom\n" in text
    assert "my_block_storage_ip = h-$my_ip\n" in text  # extraConfig is oslo.config text: not escaped
    assert "server_listen = $my_ip\n" in compute_pool.pool_conf(_pool())


def test_a_typed_value_with_a_backslash_before_a_dollar_is_refused_naming_the_key(load_sample: Any) -> None:
    raw = load_sample("minimal").model_dump(by_alias=True, exclude_none=True, mode="json")
    raw["spec"]["region"] = "a\\$b"
    inputs = novaconf.conf_inputs(Nova.model_validate(raw))
    refused = r"nova.conf: \[glance\] region_name contains a backslash"
    with pytest.raises(novaconf.ConfigError, match=refused) as exc:
        novaconf.nova_conf(inputs)
    assert "a\\$b" not in str(exc.value)
    with pytest.raises(novaconf.ConfigError, match=r"^nova-compute.conf: \["):
        novaconf.render_compute_fragment(inputs)


def test_every_typed_value_arrives_literally_in_every_release(
    venvs: dict[str, Path], load_sample: Any
) -> None:
    cases = _cases(_nova(load_sample))
    assert venvs, "no supported release"
    for release, venv in sorted(venvs.items()):
        run = subprocess.run(
            [str(venv / "bin" / "python"), "-W", "ignore", str(PROBE)],
            input=json.dumps([{"files": case["files"]} for case in cases]),
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        seen = json.loads(run.stdout)
        for case, result in zip(cases, seen, strict=True):
            where = f"{release} {sorted(case['files'])}"
            assert "error" not in result, f"{where}: {result.get('error')}"
            values = result["values"]
            want = _expected(case["auth_url"], cache="nova.conf" in case["files"])
            wrong = {k: values.get(k) for k, v in want.items() if values.get(k) != v}
            assert wrong == {}, where
            if "nova.conf" in case["files"]:
                assert values["DEFAULT.my_block_storage_ip"] == "h-192.0.2.1", where
            else:
                assert values["vnc.server_listen"] == "192.0.2.1", where
                assert values["libvirt.rbd_secret_uuid"] == "pool-owner-value", where


# issue 26 item 6: a spec.secretConfig value as published ({name}-secret-config), read from the environment
def test_a_published_value_reaches_nova_literally_in_every_release(venvs: dict[str, Path]) -> None:
    value = "s.${DEFAULT.host}$x"
    data = secrets.secret_config_data({("vault", "root_token_id"): value})
    env = {"OS_VAULT__ROOT_TOKEN_ID": data["vault.root_token_id"]}
    for release, venv in sorted(venvs.items()):
        run = subprocess.run(
            [str(venv / "bin" / "python"), "-W", "ignore", str(ENV_PROBE)],
            input=json.dumps([{"env": env}]),
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
        [seen] = json.loads(run.stdout)
        assert seen.get("values") == {"vault.root_token_id": value}, release
