"""config/ is exactly what the code generates, and verify catches every kind of drift."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

from nova_operator.install import manifests


def test_committed_config_is_current(repo_root: pathlib.Path) -> None:
    assert manifests.verify(repo_root / "config") == []


def test_verify_reports_changed_missing_and_extra_files(tmp_path: pathlib.Path) -> None:
    manifests.write(tmp_path)
    assert manifests.verify(tmp_path) == []
    role = tmp_path / "rbac" / "role.yaml"
    role.write_text(role.read_text().replace("list", "lisst", 1))
    crd = next((tmp_path / "crd").glob("*.yaml"))
    crd.unlink()
    (tmp_path / "rbac" / "extra.yaml").write_text("kind: Nothing\n")
    diffs = "".join(manifests.verify(tmp_path))
    assert "-  - lisst" in diffs or "lisst" in diffs
    assert f"+++ {crd} (generated)" in diffs
    assert "extra.yaml: not generated from the code" in diffs
    assert manifests.main(["verify", str(tmp_path)]) == 1
    assert manifests.main(["write", str(tmp_path)]) == 0
    assert manifests.main(["verify", str(tmp_path)]) == 0
    assert not (tmp_path / "rbac" / "extra.yaml").exists()
    shutil.rmtree(tmp_path / "crd")
    assert manifests.main(["bogus"]) == 2


def test_command_line_exit_codes(tmp_path: pathlib.Path) -> None:
    def run(*args: str) -> int:
        return subprocess.run(
            [sys.executable, "-m", "nova_operator.install.manifests", *args], check=False
        ).returncode

    assert run("verify", str(tmp_path)) == 1
    assert run("write", str(tmp_path)) == 0
    assert run("verify", str(tmp_path)) == 0
    assert run("nonsense") == 2
