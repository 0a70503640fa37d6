"""``make run``'s modes without a cluster: by default every node real with every release's image and
the operator installed by its chart (the image handed on or built, the caller's flags given to the
chart); ``LOCAL_OPERATOR=1`` the same cluster with the operator a local process pulling
``IfNotPresent`` (the caller's flag wins); ``STANDINS=1`` kwok and the stand-ins. The flags reach
``prepare run``, its plan and ``simcluster run``; flags that do not fit are refused."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
from typing import Any, NoReturn

import prepare.__main__ as prepare_main
import pytest
import simcluster.__main__ as simcluster_main
from prepare.plans import all_releases, run_plan
from prepare.runner import Outcome
from realnode import nova_image
from simcluster import run

from nova_operator.cli import parse_settings

REPO = pathlib.Path(__file__).resolve().parents[3]
BUILT = ("realnode.local/nova-operator:abc", pathlib.Path("/cache/nova-operator-abc.tar"))


class Handle:
    real = None
    workdir = pathlib.Path("/nonexistent/simcluster-test")  # nothing to keep the logs of

    def stop(self) -> None:
        pass


def _run(
    monkeypatch: pytest.MonkeyPatch, image: run.OperatorImage | None = None, **mode: Any
) -> dict[str, Any]:
    """``run_simulated`` up to the operator's start, with the launchers, the starts and the image
    build faked: what each was given."""
    seen: dict[str, Any] = {"built": 0}

    def launch_all_real(workdir: object, **kw: Any) -> Handle:
        seen["all_real"] = kw
        return Handle()

    def launch(workdir: object, **kw: Any) -> Handle:
        seen["kwok"] = kw
        return Handle()

    def start_chart(handle: object, image: object, operator_args: list[str]) -> object:
        seen["chart"] = (image, list(operator_args))
        raise RuntimeError("stop here")

    def start(handle: object, real: bool, metrics: int, operator_args: list[str]) -> object:
        seen["local"] = (real, list(operator_args))
        raise RuntimeError("stop here")

    def build() -> run.OperatorImage:
        seen["built"] += 1
        return BUILT

    monkeypatch.setattr(signal, "signal", lambda *a: None)  # not this test process's handlers
    monkeypatch.setattr(run, "launch_all_real", launch_all_real)
    monkeypatch.setattr(run, "launch", launch)
    monkeypatch.setattr(run, "_start_chart", start_chart)
    monkeypatch.setattr(run, "_start", start)
    monkeypatch.setattr(run, "build_operator_image", build)
    with pytest.raises(RuntimeError, match="stop here"):
        run.run_simulated(None, ["--workers=2"], operator_image=image, **mode)
    return seen


def test_by_default_every_node_is_real_with_every_release_and_the_chart_installs_the_operator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _run(monkeypatch)
    launched = seen["all_real"]
    assert tuple(launched["control_nodes"]) == ("control-0", "control-1")
    assert tuple(launched["compute_nodes"]) == run.REAL_POOL_NODES
    assert launched["node_labels"] == dict.fromkeys(run.REAL_POOL_NODES, run.POOL_NODE_LABELS)
    assert list(launched["releases"]) == nova_image.releases() == all_releases()  # an upgrade finds its image
    assert len(all_releases()) > 1
    assert "kwok" not in seen
    assert "local" not in seen
    image, args = seen["chart"]
    assert seen["built"] == 1
    assert image == BUILT
    # the caller's flags go to the chart as they are: no --leader-elect=false (the chart's two
    # replicas elect a leader) and no pull policy here (the chart's values add it)
    assert args == ["--workers=2"]


def test_an_image_handed_on_is_not_built_again(monkeypatch: pytest.MonkeyPatch) -> None:
    given = ("realnode.local/nova-operator:given", pathlib.Path("/x/given.tar"))
    seen = _run(monkeypatch, given)
    assert seen["built"] == 0  # make run's prepare stage built it
    assert seen["chart"][0] == given


def test_the_local_operator_runs_on_the_same_cluster_pulling_if_not_present_without_a_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _run(monkeypatch, local_operator=True)
    assert list(seen["all_real"]["releases"]) == all_releases()
    assert seen["built"] == 0
    assert "chart" not in seen
    real, args = seen["local"]
    assert real is True
    settings = parse_settings(args)
    assert settings.default_image_pull_policy == "IfNotPresent"  # the nodes' images, no registry
    assert not settings.leader_election.enabled
    assert args[-1] == "--workers=2"


def test_the_stand_ins_run_kwok_and_the_operators_default_pull_policy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _run(monkeypatch, real=False)
    assert "all_real" not in seen
    assert "chart" not in seen
    assert seen["built"] == 0
    assert seen["kwok"]["pools"] == {run.POOL: 3}
    real, args = seen["local"]
    assert real is False
    assert args == ["--leader-elect=false", "--workers=2"]
    assert parse_settings(args).default_image_pull_policy is None


def test_the_callers_pull_policy_wins() -> None:
    args = run.run_args(["--default-image-pull-policy", "Always"], real_nodes=True)
    assert parse_settings(args).default_image_pull_policy == "Always"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], {"real": True, "local_operator": False, "operator_image": None}),
        (["--local-operator"], {"real": True, "local_operator": True, "operator_image": None}),
        (["--standins"], {"real": False, "local_operator": False, "operator_image": None}),
        (
            ["--operator-image", "r/op:t", "--operator-image-archive", "/a.tar"],
            {"real": True, "local_operator": False, "operator_image": ("r/op:t", pathlib.Path("/a.tar"))},
        ),
    ],
)
def test_simcluster_run_passes_the_flags(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], expected: dict[str, Any]
) -> None:
    seen: list[tuple[object, list[str], dict[str, Any]]] = []

    def run_simulated(workdir: object, operator_args: list[str], **kw: Any) -> int:
        seen.append((workdir, list(operator_args), kw))
        return 0

    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setattr(simcluster_main, "run_simulated", run_simulated)
    argv = ["run", "--workdir", "/tmp/x", *flags, "--", "--workers=2"]
    assert simcluster_main.main(argv) == 0
    assert seen == [(pathlib.Path("/tmp/x"), ["--workers=2"], expected)]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--local-operator", "--operator-image", "r/op:t", "--operator-image-archive", "/a"], "local"),
        (["--standins", "--operator-image", "r/op:t", "--operator-image-archive", "/a"], "standins"),
        (["--operator-image", "r/op:t"], "go together"),
    ],
)
def test_simcluster_run_refuses_operator_flags_that_do_not_fit(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], says: str
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setattr(simcluster_main, "run_simulated", lambda *a, **k: pytest.fail("ran"))
    with pytest.raises(SystemExit, match=says):
        simcluster_main.main(["run", *flags])


def test_the_stand_ins_and_the_local_operator_are_two_modes() -> None:
    with pytest.raises(SystemExit):
        simcluster_main.main(["run", "--standins", "--local-operator"])
    with pytest.raises(SystemExit):
        prepare_main.main(["run", "--standins", "--local-operator"])


def _prepare_run(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], outputs: dict[str, str] | None = None
) -> tuple[dict[str, Any], list[str], dict[str, str]]:
    plans: list[dict[str, Any]] = []
    execs: list[tuple[list[str], dict[str, str]]] = []

    def plan(**kw: Any) -> list[list[object]]:
        plans.append(kw)
        return []

    def execve(path: str, argv: list[str], env: dict[str, str]) -> NoReturn:
        execs.append((argv, env))
        raise SystemExit(0)

    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("DEPLOYTOOLS_BIN", raising=False)
    monkeypatch.setattr(prepare_main, "run_plan", plan)
    monkeypatch.setattr(prepare_main, "prepare", lambda *a: Outcome(outputs=dict(outputs or {})))
    monkeypatch.setattr(os, "execve", execve)
    monkeypatch.setattr(os, "chdir", lambda path: None)
    with pytest.raises(SystemExit):
        prepare_main.main(["run", "--python", "/bin/py", *flags])
    ((argv, env),) = execs
    assert argv[:4] == ["/bin/py", "-m", "simcluster", "run"]
    return plans[0], argv, env


def test_prepare_run_hands_on_the_built_operator_image_and_helm(monkeypatch: pytest.MonkeyPatch) -> None:
    built = {"ref": "realnode.local/nova-operator:0123", "archive": "/c/nova-operator-0123.tar", "layers": 3}
    noise = "I: mmdebstrap said {something} on stdout\n"
    outputs = {
        "operator-image": noise + json.dumps(built, indent=1),
        "deploytools": "go: downloading x\n/var/cache/nova-envtest/deploytools-v",
    }
    plan, argv, env = _prepare_run(monkeypatch, ["--", "--workers=2"], outputs)
    assert plan == {"standins": False, "kubeconfig": False, "make_venv": False, "chart": True}
    i = argv.index("--operator-image")
    assert argv[i : i + 4] == ["--operator-image", built["ref"], "--operator-image-archive", built["archive"]]
    assert "--local-operator" not in argv
    assert "--standins" not in argv
    assert argv[-2:] == ["--", "--workers=2"]
    assert env["DEPLOYTOOLS_BIN"] == "/var/cache/nova-envtest/deploytools-v"


def test_prepare_run_with_the_local_operator_builds_no_chart(monkeypatch: pytest.MonkeyPatch) -> None:
    plan, argv, env = _prepare_run(monkeypatch, ["--local-operator"])
    assert plan["chart"] is False
    assert "--local-operator" in argv
    assert "--operator-image" not in argv
    assert "DEPLOYTOOLS_BIN" not in env


def test_prepare_run_with_the_stand_ins_hands_the_flag_on(monkeypatch: pytest.MonkeyPatch) -> None:
    plan, argv, _ = _prepare_run(monkeypatch, ["--standins"])
    assert plan["standins"] is True
    assert "--standins" in argv


def test_last_json_skips_what_came_before_and_refuses_none() -> None:
    assert prepare_main.last_json('{"a": 1}\n{not json\n{"ref": "x",\n "n": 2}\n') == {"ref": "x", "n": "2"}
    with pytest.raises(ValueError, match="no JSON"):
        prepare_main.last_json("nothing\n")


def _keys(lanes: list[list[Any]]) -> list[list[str]]:
    return [[s.key for s in lane] for lane in lanes]


def test_the_plan_builds_every_releases_images_the_nodes_helm_and_the_operator_image() -> None:
    chart = run_plan(standins=False, kubeconfig=False, make_venv=False)
    assert _keys(chart) == [
        ["apt", "nova-venvs", "service-venvs", "images", "nova-oci-image"],
        ["control-plane", "realnode", "deploytools"],
        ["operator-image"],
    ]
    stages = {s.key: s for lane in chart for s in lane}
    for key in ("nova-venvs", "images", "nova-oci-image"):
        assert all(r in stages[key].title for r in all_releases()), stages[key].title
        assert not set(all_releases()) & set(stages[key].argv), key  # no release named: every release
    assert stages["control-plane"].env == {"ENVTEST_NO_KWOK": "1"}  # the real tier runs no kwok
    assert stages["realnode"].needs == ("apt",)
    image = stages["operator-image"]
    assert image.argv[-2:] == ("-m", "opimage")
    assert image.needs == ("apt",)  # buildah and mmdebstrap are Debian packages
    assert image.output
    assert stages["deploytools"].output
    # the local operator: no helm, no operator image
    local = run_plan(standins=False, kubeconfig=False, make_venv=True, chart=False)
    assert _keys(local) == [["apt", "venv", *_keys(chart)[0][1:]], ["control-plane", "realnode"]]


def test_the_stand_ins_and_a_kubeconfig_build_only_what_they_start() -> None:
    standins = run_plan(standins=True, kubeconfig=False, make_venv=True)
    assert _keys(standins) == [["venv"], ["control-plane"]]
    assert standins[1][0].env == {}
    assert _keys(run_plan(standins=False, kubeconfig=True, make_venv=True)) == [["venv"]]


def _dry(*assignments: str) -> str:
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "run", *assignments],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    return done.stdout


def test_make_run_asks_for_its_modes() -> None:
    plain = _dry()
    assert "--local-operator" not in plain
    assert "--standins" not in plain
    assert "--local-operator" in _dry("LOCAL_OPERATOR=1")
    assert "--standins" in _dry("STANDINS=1")
    assert "-- --workers=2" in _dry("ARGS=--workers=2")
