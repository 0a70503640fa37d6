"""Every rendered nova.conf, overlay and compute fragment is accepted by the real nova.

For each supported release, oslo-config-validator (``--fatal-warnings``: deprecated options
fail too) runs inside that release's nova venv over nova's own option namespaces
(``etc/nova/nova-config-generator.conf`` of the sdist).  The venvs are made by
``tools/catalogs/ensure_venvs.sh`` (CI calls it first; called here too, a no-op when cached).

oslo-config-validator skips ``[keystone_authtoken]`` (its options depend on the auth
plugin), so that section is checked against the generated catalogs, which hold the
``password`` plugin's options.
"""

from __future__ import annotations

import configparser
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from nova_operator import catalog
from nova_operator.models.nova import Nova
from nova_operator.renderers import novaconf

REPO = Path(__file__).resolve().parents[3]
TOOLS = REPO / "tools" / "catalogs"


def _rendered(load_sample: Callable[[str], Nova]) -> dict[str, str]:
    files: dict[str, str] = {}
    for sample in ("minimal", "full"):
        nova = load_sample(sample)
        inputs = novaconf.conf_inputs(nova)
        for key, text in novaconf.config_data(inputs).items():
            if key.endswith(".conf"):
                files[f"{sample}-{key}"] = text
        files[f"{sample}-nova-compute.conf"] = novaconf.render_compute_fragment(inputs)
        if nova.spec.remote_compute is not None:
            remote = novaconf.RemoteComputeInputs(
                keystone_endpoint=nova.spec.remote_compute.keystone_endpoint
            )
            files[f"{sample}-remote-nova-compute.conf"] = novaconf.render_compute_fragment(
                inputs, remote=remote
            )
    # the switches the two samples leave at one value each
    minimal = novaconf.conf_inputs(load_sample("minimal"))
    files["switches-nova.conf"] = novaconf.nova_conf(
        novaconf.ConfInputs(
            **{
                **{f: getattr(minimal, f) for f in minimal.__dataclass_fields__},
                "console_enabled": False,
                "messaging_tls": True,
                "per_logger_levels": {"amqp": "WARNING"},
            }
        )
    )
    return files


@pytest.mark.parametrize("release", catalog.supported_releases())
def test_oslo_config_validator_accepts_every_rendered_file(
    release: str, venvs: dict[str, Path], load_sample: Callable[[str], Nova], tmp_path: Path
) -> None:
    venv = venvs[release]
    paths = []
    for name, text in sorted(_rendered(load_sample).items()):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        paths.append(str(path))
    out = subprocess.run(
        [
            str(venv / "bin" / "python"),
            str(TOOLS / "validate_many.py"),
            str(venv / "nova-opt-data.yaml"),
            *paths,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    results = json.loads(out)
    failed = {Path(p).name: r["log"] for p, r in results.items() if r["rc"] != 0}
    assert failed == {}, f"nova {release} refuses: {json.dumps(failed, indent=1)}"
    assert len(results) == len(paths)


@pytest.mark.parametrize("release", catalog.supported_releases())
def test_keystone_authtoken_keys_are_in_the_catalog(release: str, load_sample: Callable[[str], Nova]) -> None:
    for name, text in _rendered(load_sample).items():
        parser = configparser.ConfigParser(interpolation=None, default_section="\x00none")
        parser.read_string(text)
        if parser.has_section("keystone_authtoken"):
            unknown = catalog.unknown_options(
                release, {"keystone_authtoken": dict(parser["keystone_authtoken"])}
            )
            assert unknown == [], name


def test_the_validator_does_refuse_an_unknown_option(venvs: dict[str, Path], tmp_path: Path) -> None:
    venv = venvs["2025.2"]
    bad = tmp_path / "bad.conf"
    bad.write_text("[DEFAULT]\nno_such_option = 1\n", encoding="utf-8")
    out = subprocess.run(
        [
            str(venv / "bin" / "python"),
            str(TOOLS / "validate_many.py"),
            str(venv / "nova-opt-data.yaml"),
            str(bad),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    [result] = json.loads(out).values()
    assert result["rc"] == 1
    assert "ERROR: DEFAULT/no_such_option is not part of the sample config" in result["log"]


def test_the_committed_catalogs_are_what_the_generator_writes(venvs: dict[str, Path]) -> None:
    """The catalogs are generated data: regenerating them from the pinned venvs changes nothing."""
    result = subprocess.run(
        [sys.executable, str(TOOLS / "generate.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
