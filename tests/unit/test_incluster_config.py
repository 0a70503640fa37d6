"""In-cluster configuration: which source wins, the token re-read on rotation, the own namespace."""

from __future__ import annotations

import pathlib
import subprocess

import pytest

from nova_operator import cli
from nova_operator.kube.config import ConfigError, load_api_client, pod_namespace


def _mount(tmp_path: pathlib.Path, token: str = "token-a", namespace: str = "ops") -> pathlib.Path:
    mount = tmp_path / "sa"
    mount.mkdir()
    (mount / "token").write_text(token)
    key, cert = tmp_path / "ca.key", mount / "ca.crt"
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            *curve,
            "-nodes",
            "-subj",
            "/CN=ca",
            "-days",
            "1",
            "-keyout",
            key,
            "-out",
            cert,
        ],
        check=True,
        capture_output=True,
    )
    (mount / "namespace").write_text(namespace)
    return mount


@pytest.fixture
def in_pod(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> pathlib.Path:
    for var in ("KUBECONFIG", "POD_NAMESPACE", "NOVA_OPERATOR_SERVICE_ACCOUNT_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    monkeypatch.setenv("HOME", str(home))
    return _mount(tmp_path)


async def test_in_a_pod_the_mount_wins_over_a_stray_home_kubeconfig(in_pod: pathlib.Path) -> None:
    api = await load_api_client(service_account_dir=str(in_pod))
    try:
        cfg = api.configuration
        assert cfg.host == "https://10.0.0.1:443"
        assert cfg.ssl_ca_cert == str(in_pod / "ca.crt")
        assert await cfg.get_api_key_with_prefix("BearerToken") == "Bearer token-a"
    finally:
        await api.close()


async def test_the_token_is_read_again_when_the_kubelet_rotates_it(in_pod: pathlib.Path) -> None:
    api = await load_api_client(service_account_dir=str(in_pod))
    try:
        new = in_pod / "token.new"
        new.write_text("token-b\n")
        new.rename(in_pod / "token")  # an atomic swap, as the kubelet's ..data rename
        assert await api.configuration.get_api_key_with_prefix("BearerToken") == "Bearer token-b"
        (in_pod / "token").unlink()  # mid-swap: the previous token, not an error
        assert await api.configuration.get_api_key_with_prefix("BearerToken") == "Bearer token-b"
    finally:
        await api.close()


async def test_an_explicit_kubeconfig_wins_over_the_pod(in_pod: pathlib.Path, tmp_path: pathlib.Path) -> None:
    with pytest.raises(ConfigError, match="kubeconfig file not found"):
        await load_api_client(kubeconfig=str(tmp_path / "missing"), service_account_dir=str(in_pod))


async def test_a_pod_without_its_token_is_a_clear_error(in_pod: pathlib.Path) -> None:
    (in_pod / "token").unlink()
    with pytest.raises(ConfigError, match="token"):
        await load_api_client(service_account_dir=str(in_pod))


def test_own_namespace_from_pod_namespace_then_the_mount(
    in_pod: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert pod_namespace(str(in_pod)) == "ops"
    monkeypatch.setenv("POD_NAMESPACE", "from-downward-api")
    assert pod_namespace(str(in_pod)) == "from-downward-api"
    monkeypatch.delenv("POD_NAMESPACE")
    assert pod_namespace(str(in_pod / "nowhere")) is None


def test_the_lease_and_the_network_policy_source_follow_the_own_namespace(
    in_pod: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOVA_OPERATOR_LEADER_ELECTION_NAMESPACE", raising=False)
    monkeypatch.setenv("NOVA_OPERATOR_SERVICE_ACCOUNT_DIR", str(in_pod))
    s = cli.parse_settings([])
    assert (s.operator_namespace, s.leader_election.namespace) == ("ops", "ops")
    assert s.kube.service_account_dir == str(in_pod)
    monkeypatch.setenv("POD_NAMESPACE", "platform")
    s = cli.parse_settings(["--leader-election-namespace=leases"])
    assert (s.operator_namespace, s.leader_election.namespace) == ("platform", "leases")


def test_outside_a_pod_the_namespace_defaults_to_nova_system(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.delenv("NOVA_OPERATOR_LEADER_ELECTION_NAMESPACE", raising=False)
    monkeypatch.setenv("NOVA_OPERATOR_SERVICE_ACCOUNT_DIR", str(tmp_path / "no-mount"))
    s = cli.parse_settings([])
    assert (s.operator_namespace, s.leader_election.namespace) == ("nova-system", "nova-system")


def test_the_default_mount_is_the_kubelets() -> None:
    assert cli.parse_settings([]).kube.service_account_dir == "/var/run/secrets/kubernetes.io/serviceaccount"
