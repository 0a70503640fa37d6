"""Issue 13 item 3: every credential reaches nova literally, through the real oslo.config.

For each supported release, the environment the rendered pods get (each ``OS_*`` variable
resolved through its ``secretKeyRef`` against the rendered Secrets) is read by that release's
oslo.config (in its nova venv, ``fixtures/oslo_probe.py``), and the DSNs and transport URLs
are parsed by its SQLAlchemy and oslo.messaging. Every password, with each of
``$ % @ : / ? # & + ' " \\`` and a space, and the ``$name`` / ``${name}`` forms, must come
out exactly as the user wrote it into their Secrets.
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from nova_operator.models.nova import Nova
from nova_operator.naming import Component
from nova_operator.renderers import secrets, workload

PROBE = Path(__file__).parent / "fixtures" / "oslo_probe.py"
CHARS = ["$", "%", "@", ":", "/", "?", "#", "&", "+", "'", '"', "\\", " "]
PASSWORDS = [f"pw{c}x{c}{c}end{c}" for c in CHARS] + [
    "$debug",
    "${DEFAULT.host}",
    "a$$b",
    "tail$",
    "%24%40",
    "\\\\x",
    "all $%@:/?#&+'\"\\ of them",
]


def _data(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def _env(container: dict[str, Any], published: dict[str, dict[str, str]]) -> dict[str, str]:
    env = {}
    for var in container.get("env") or []:
        ref = (var.get("valueFrom") or {}).get("secretKeyRef")
        if var["name"].startswith("OS_") and ref is not None:
            env[var["name"]] = published[ref["name"]][ref["key"]]
    return env


def _cases(nova: Nova, password: str) -> list[dict[str, Any]]:
    """The metadata pod's env (both DSNs, bus, passwords, shared secret) and the compute contract's."""
    api = secrets.database_dsn(nova, "api", username=f"u{password}", password=password)
    cell = secrets.database_dsn(nova, "cell", username="nova", password=password)
    managed = secrets.managed_transport_url(username="nova", password=password, host="rabbit", port=5672)
    # a brownfield URL the user wrote, with '$' and the sub-delims left raw (legal in userinfo)
    brownfield = f"rabbit://nova:{quote(password, safe='$&+,;=')}@mq.example.org:5672/"
    out = []
    for url in (managed, brownfield):
        objects = [
            secrets.dsn_secret(nova, "api", api),
            secrets.dsn_secret(nova, "cell", cell),
            secrets.transport_url_secret(nova, url),
            secrets.oslo_credentials_secret(nova, password=password, metadata_secret=password),
        ]
        published = {o["metadata"]["name"]: _data(o) for o in objects}
        inputs = workload.WorkloadInputs(config_map="cm", digests=workload.Digests(), broker_port=5672)
        deployment = workload.deployments(nova, inputs)[Component.METADATA]
        (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if _env(c, published)]
        out.append({"env": _env(container, published), "who": "metadata pod", "url": url})
        contract = _data(
            secrets.compute_config_secret(
                nova, fragment="", transport_url=url, password=password, metadata_secret=password
            )
        )
        out.append(
            {
                "env": {
                    "OS_DEFAULT__TRANSPORT_URL": contract["transport_url"],
                    "OS_KEYSTONE_AUTHTOKEN__PASSWORD": contract["password"],
                    "OS_NEUTRON__METADATA_PROXY_SHARED_SECRET": contract["metadata_proxy_shared_secret"],
                },
                "who": "compute contract",
                "url": url,
            }
        )
    return out


def test_every_credential_arrives_literally_in_every_release(
    venvs: dict[str, Path], load_sample: Any
) -> None:
    nova = load_sample("minimal")
    cases = [(password, case) for password in PASSWORDS for case in _cases(nova, password)]
    assert venvs, "no supported release"
    for release, venv in sorted(venvs.items()):
        run = subprocess.run(
            [str(venv / "bin" / "python"), "-W", "ignore", str(PROBE)],
            input=json.dumps([{"env": case["env"]} for _, case in cases]),
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        wrong = []
        for (password, case), seen in zip(cases, json.loads(run.stdout), strict=True):
            where = f"{release} {case['who']} password {password!r}"
            if "error" in seen:
                wrong.append(f"{where}: {seen['error']}")
                continue
            for key, value in seen["values"].items():
                if key.endswith(("password", "metadata_proxy_shared_secret")) and value != password:
                    wrong.append(f"{where}: {key} = {value!r}")
            for key, parsed in seen["dsn"].items():
                if parsed["password"] != password:
                    wrong.append(f"{where}: {key} password = {parsed['password']!r}")
            for key, parsed in seen["transport"].items():
                if parsed["password"] != password:
                    wrong.append(f"{where}: {key} password = {parsed['password']!r}")
            if len(seen["dsn"]) + len(seen["transport"]) == 0 and case["who"] == "metadata pod":
                wrong.append(f"{where}: no DSN or transport URL reached the probe")
        assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("value", ["a\\$b", "\\$", "x\\${y}"])
def test_a_plain_credential_oslo_cannot_carry_is_refused_without_echoing_it(value: str) -> None:
    with pytest.raises(secrets.CredentialNotRepresentable) as refused:
        secrets.oslo_value(value)
    assert value not in str(refused.value)


def test_inside_urls_a_backslash_dollar_is_fine(load_sample: Any) -> None:
    url = secrets.managed_transport_url(username="u", password="a\\$b", host="h", port=5672)
    assert "$" not in url
    assert "$" not in secrets.oslo_url("rabbit://u:a\\$b@h:5672/")
