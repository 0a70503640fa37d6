"""``spec.tls.caBundleSecretRef``: the HTTPS CA bundle in nova.conf, the compute contract, every pod of
a Nova, a pool's own bundle, and the digest that rolls the pods once when the bundle changes."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from nova_operator import catalog
from nova_operator.digests import sha256_hex
from nova_operator.models.nova import Nova
from nova_operator.models.novacompute import NovaCompute
from nova_operator.renderers import compute_pool, jobs, novaconf, secrets, workload
from nova_operator.renderers.novaconf import COMPUTE_CONFIG_DIR, HTTPS_CA_FILE, HTTPS_CA_SECTIONS

FIXTURES = Path(__file__).resolve().parent / "fixtures"

BUNDLE = "-----BEGIN CERTIFICATE-----\nMIIBhttpsCaFake\n-----END CERTIFICATE-----\n"
CONTRACT_CA = f"{COMPUTE_CONFIG_DIR}/https-ca.crt"


def nova(release: str = "2026.1", tls: dict[str, Any] | None = None, *, sample: str = "full") -> Nova:
    raw = yaml.safe_load((FIXTURES / f"{sample}.yaml").read_text())
    raw["spec"]["openStackRelease"] = release
    if tls is not None:
        raw["spec"]["tls"] = tls
    return Nova.model_validate(raw)


TLS = {"caBundleSecretRef": {"name": "internal-ca"}}


def _https_sections(sections: dict[str, dict[str, str]]) -> list[str]:
    return [s for s in (*HTTPS_CA_SECTIONS, "barbican") if s in sections]


def test_the_ref_defaults_its_key_to_ca_crt_and_keeps_an_override() -> None:
    assert nova(tls=TLS).spec.tls is not None
    ref = nova(tls=TLS).spec.tls.ca_bundle_secret_ref  # type: ignore[union-attr]
    assert (ref.name, ref.key) == ("internal-ca", "ca.crt")
    other = nova(tls={"caBundleSecretRef": {"name": "bundle", "key": "trust.pem"}}).spec.tls
    assert other is not None
    assert other.ca_bundle_secret_ref.key == "trust.pem"


def test_every_https_section_names_the_mounted_bundle() -> None:
    sections = novaconf.nova_conf_sections(novaconf.conf_inputs(nova(tls=TLS)))
    rendered = _https_sections(sections)
    # the full fixture enables Cinder and Barbican: all seven sections are rendered
    assert rendered == [*HTTPS_CA_SECTIONS, "barbican"]
    for section in HTTPS_CA_SECTIONS:
        assert sections[section]["cafile"] == HTTPS_CA_FILE, section
    assert sections["barbican"]["verify_ssl_path"] == HTTPS_CA_FILE
    assert sections["barbican"]["cafile"] == HTTPS_CA_FILE  # 2026.1's catalog has it


def test_without_the_field_no_section_names_a_ca_file() -> None:
    for inputs in (novaconf.conf_inputs(nova()), novaconf.conf_inputs(nova(sample="minimal"))):
        for sections in (novaconf.nova_conf_sections(inputs), novaconf.compute_fragment_sections(inputs)):
            for options in sections.values():
                assert "cafile" not in options
                assert "verify_ssl_path" not in options


@pytest.mark.parametrize("release", catalog.supported_releases())
def test_only_options_of_the_releases_catalog_are_rendered(release: str) -> None:
    inputs = novaconf.conf_inputs(nova(release, TLS))
    known = catalog.load_catalog(release)
    for sections in (novaconf.nova_conf_sections(inputs), novaconf.compute_fragment_sections(inputs)):
        for section in _https_sections(sections):
            for option in ("cafile", "verify_ssl_path"):
                if option in sections[section]:
                    assert known.knows(section, option), (release, section, option)
    barbican = novaconf.nova_conf_sections(inputs)["barbican"]
    assert ("cafile" in barbican) is known.knows("barbican", "cafile")


def test_2025_2_has_no_barbican_cafile_and_gets_verify_ssl_path_only() -> None:
    barbican = novaconf.nova_conf_sections(novaconf.conf_inputs(nova("2025.2", TLS)))["barbican"]
    assert barbican["verify_ssl_path"] == HTTPS_CA_FILE
    assert "cafile" not in barbican


def test_the_compute_fragment_names_the_contracts_copy_local_and_remote() -> None:
    n = nova(tls=TLS)
    inputs = novaconf.conf_inputs(n)
    remote = novaconf.RemoteComputeInputs(keystone_endpoint="https://keystone.example.org/v3")
    for sections in (
        novaconf.compute_fragment_sections(inputs),
        novaconf.compute_fragment_sections(inputs, remote=remote),
    ):
        for section in HTTPS_CA_SECTIONS:
            if section in sections:
                assert sections[section]["cafile"] == CONTRACT_CA, section
        assert sections["barbican"]["verify_ssl_path"] == CONTRACT_CA


def test_every_rendered_ca_option_is_an_owned_key() -> None:
    sections = novaconf.nova_conf_sections(novaconf.conf_inputs(nova(tls=TLS)))
    for section in _https_sections(sections):
        for option in ("cafile", "verify_ssl_path"):
            if option in sections[section]:
                assert option in novaconf.OWNED_KEYS[section], (section, option)


def _contract(n: Nova, https_ca: str | None) -> dict[str, Any]:
    inputs = novaconf.conf_inputs(n)
    return secrets.compute_config_secret(
        n,
        fragment=novaconf.render_compute_fragment(inputs),
        transport_url="rabbit://u:p@mq:5671/",
        password="pw",
        metadata_secret="ms",
        ca_crt="-----BEGIN CERTIFICATE-----\nbroker\n-----END CERTIFICATE-----\n",
        https_ca=https_ca,
    )


def test_the_contract_carries_the_bundle_under_its_own_key() -> None:
    data = _contract(nova(tls=TLS), BUNDLE)["data"]
    assert base64.b64decode(data["https-ca.crt"]).decode() == BUNDLE
    assert base64.b64decode(data["ca.crt"]).decode() != BUNDLE  # the broker's stays apart
    assert "https-ca.crt" not in _contract(nova(), BUNDLE)["data"]
    with pytest.raises(ValueError, match="HTTPS CA bundle"):
        _contract(nova(tls=TLS), None)


def _https_volume(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in spec["volumes"] if v["name"] == "https-ca"]


def _https_mounts(container: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in container.get("volumeMounts") or [] if m["name"] == "https-ca"]


def test_every_deployment_mounts_the_bundle_and_carries_its_digest() -> None:
    n = nova(tls={"caBundleSecretRef": {"name": "internal-ca", "key": "trust.pem"}})
    inputs = workload.WorkloadInputs(
        config_map="nova-config-1", digests=workload.Digests(https_ca=sha256_hex(BUNDLE))
    )
    deployments = workload.deployments(n, inputs)
    assert deployments
    for role, dep in deployments.items():
        pod = dep["spec"]["template"]["spec"]
        assert _https_volume(pod) == [
            {
                "name": "https-ca",
                "secret": {
                    "secretName": "internal-ca",
                    "defaultMode": 0o444,
                    "items": [{"key": "trust.pem", "path": "ca.crt"}],
                },
            }
        ], role
        assert _https_mounts(pod["containers"][0]) == [
            {"name": "https-ca", "mountPath": "/etc/nova-https-ca", "readOnly": True}
        ]
        annotations = dep["spec"]["template"]["metadata"]["annotations"]
        assert annotations["nova.c5c3.io/https-ca-hash"] == sha256_hex(BUNDLE)


def test_another_bundle_changes_each_pod_template_and_no_bundle_leaves_no_trace() -> None:
    n = nova(tls=TLS)

    def templates(bundle: str) -> dict[Any, Any]:
        inputs = workload.WorkloadInputs(
            config_map="nova-config-1", digests=workload.Digests(https_ca=sha256_hex(bundle))
        )
        return {role: d["spec"]["template"] for role, d in workload.deployments(n, inputs).items()}

    before, after = templates(BUNDLE), templates(BUNDLE.replace("Fake", "Next"))
    for role in before:
        assert before[role] != after[role], role
        assert before[role]["spec"] == after[role]["spec"], role  # only the annotation moved
    plain = workload.deployments(nova(), workload.WorkloadInputs(config_map="nova-config-1"))
    for dep in plain.values():
        assert not _https_volume(dep["spec"]["template"]["spec"])
        assert "nova.c5c3.io/https-ca-hash" not in (
            dep["spec"]["template"]["metadata"].get("annotations") or {}
        )


def test_the_jobs_and_the_discovery_job_mount_it_too() -> None:
    n = nova(tls=TLS)
    pods = [
        jobs.db_sync_job(n, "nova-config-1")["spec"]["template"]["spec"],
        compute_pool.discover_hosts_job(n, image="img", config_map="nova-config-1", pull_policy="Always")[
            "spec"
        ]["template"]["spec"],
    ]
    for pod in pods:
        assert [v["secret"]["secretName"] for v in _https_volume(pod)] == ["internal-ca"]
        assert _https_mounts(pod["containers"][0])


def pool(tls: dict[str, Any] | None = None) -> NovaCompute:
    spec: dict[str, Any] = {"novaRef": {"name": "nova"}, "nodeSelector": {"pool": "rack7"}}
    if tls is not None:
        spec["tls"] = tls
    return NovaCompute.model_validate(
        {
            "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
            "kind": "NovaCompute",
            "metadata": {"name": "rack7", "namespace": "openstack", "uid": "u1"},
            "spec": spec,
        }
    )


def _pool_inputs(**kw: Any) -> compute_pool.PoolInputs:
    return compute_pool.PoolInputs(
        image="ghcr.io/c5c3/nova-compute:2026.1",
        config_map="rack7-config-abcdef12",
        contract_secret="nova-compute-config",
        contract_hash="f" * 64,
        release="2026.1",
        **kw,
    )


def test_a_pools_own_bundle_overrides_the_contracts_in_its_config() -> None:
    sections = compute_pool.pool_conf_sections(pool(TLS), "2026.1")
    for section in HTTPS_CA_SECTIONS:
        assert sections[section] == {"cafile": HTTPS_CA_FILE}, section
    assert sections["barbican"] == {"cafile": HTTPS_CA_FILE, "verify_ssl_path": HTTPS_CA_FILE}
    assert compute_pool.pool_conf_sections(pool(TLS), "2025.2")["barbican"] == {
        "verify_ssl_path": HTTPS_CA_FILE
    }
    plain = compute_pool.pool_conf_sections(pool(), "2026.1")
    assert not set(plain) & {*HTTPS_CA_SECTIONS, "barbican"}


def test_a_pools_own_bundle_is_mounted_and_its_digest_rolls_the_pool() -> None:
    ds = compute_pool.daemonset(pool(TLS), _pool_inputs(https_ca_hash=sha256_hex(BUNDLE)))
    assert ds is not None
    template = ds["spec"]["template"]
    assert [v["secret"]["secretName"] for v in _https_volume(template["spec"])] == ["internal-ca"]
    (compute,) = template["spec"]["containers"]
    assert _https_mounts(compute) == [
        {"name": "https-ca", "mountPath": "/etc/nova-https-ca", "readOnly": True}
    ]
    assert template["metadata"]["annotations"][compute_pool.HTTPS_CA_HASH_ANNOTATION] == sha256_hex(BUNDLE)
    plain = compute_pool.daemonset(pool(), _pool_inputs())
    assert plain is not None
    assert not _https_volume(plain["spec"]["template"]["spec"])
    assert compute_pool.HTTPS_CA_HASH_ANNOTATION not in plain["spec"]["template"]["metadata"]["annotations"]
