"""``make run REAL_NODES=mixed``: the flag reaches ``launch_real`` as real compute nodes with the sample
release's image; the operator is installed by its chart there (the control plane's pod access and
the compute API's relayed port asked for, the image handed on or built, the caller's flags given to
the chart), or with ``LOCAL_OPERATOR=1`` runs locally with ``--default-image-pull-policy
IfNotPresent`` (the caller's flag wins); without the flag nothing changes."""

from __future__ import annotations

import json
import os
import pathlib
import signal
from typing import Any, NoReturn

import prepare.__main__ as prepare_main
import pytest
import simcluster.__main__ as simcluster_main
from prepare.plans import run_plan, sample_release
from prepare.runner import Outcome
from simcluster import run

from nova_operator.cli import parse_settings


class Handle:
    real = None

    def stop(self) -> None:
        pass


def _launch_and_start(
    monkeypatch: pytest.MonkeyPatch, real_nodes: bool, local_operator: bool = True
) -> tuple[dict[str, Any], list[str]]:
    launched: dict[str, Any] = {}
    started: list[list[str]] = []

    def launch_real(workdir: object, **kw: Any) -> Handle:
        launched.update(kw)
        return Handle()

    def start(handle: object, real: bool, metrics: int, operator_args: list[str]) -> object:
        started.append(list(operator_args))
        raise RuntimeError("stop here")

    monkeypatch.setattr(signal, "signal", lambda *a: None)  # not this test process's handlers
    monkeypatch.setattr(run, "launch_real", launch_real)
    monkeypatch.setattr(run, "_start", start)
    with pytest.raises(RuntimeError, match="stop here"):
        run.run_simulated(
            None, ["--workers=2"], real=True, real_nodes=real_nodes, local_operator=local_operator
        )
    (args,) = started
    return launched, args


def _chart_start(
    monkeypatch: pytest.MonkeyPatch, image: run.OperatorImage | None, *, all_real: bool = False
) -> tuple[dict[str, Any], list[tuple[object, ...]], list[str]]:
    """``run_simulated`` in the chart mode (the mixed tier, or ``all_real``) up to the chart's install,
    with the launcher, the install and the image build faked: what each was given."""
    launched: dict[str, Any] = {}
    started: list[tuple[object, ...]] = []
    built: list[str] = []

    def launch_real(workdir: object, **kw: Any) -> Handle:
        launched.update(kw)
        return Handle()

    def start_chart(handle: object, image: object, port: object, operator_args: list[str]) -> object:
        started.append((image, port, list(operator_args)))
        raise RuntimeError("stop here")

    def build() -> run.OperatorImage:
        built.append("built")
        return ("realnode.local/nova-operator:abc", pathlib.Path("/cache/nova-operator-abc.tar"))

    monkeypatch.setattr(signal, "signal", lambda *a: None)
    if all_real:
        monkeypatch.setattr(run, "launch_all_real", launch_real)
        monkeypatch.setattr(run, "launch_real", lambda *a, **k: pytest.fail("the stand-in's tier started"))
    else:
        monkeypatch.setattr(run, "launch_real", launch_real)
    monkeypatch.setattr(run, "_start_chart", start_chart)
    monkeypatch.setattr(run, "_start", lambda *a: pytest.fail("the local operator started"))
    monkeypatch.setattr(run, "build_operator_image", build)
    mode = {"all_real": True} if all_real else {"real_nodes": True}
    with pytest.raises(RuntimeError, match="stop here"):
        run.run_simulated(None, ["--workers=2"], real=True, operator_image=image, **mode)
    return launched, started, built


def test_real_nodes_install_the_operator_by_its_chart_with_pod_access_and_the_relayed_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    image = ("realnode.local/nova-operator:given", pathlib.Path("/x/given.tar"))
    launched, started, built = _chart_start(monkeypatch, image)
    assert launched["real_compute_nodes"] is True
    assert launched["pod_access"] is True  # logs through the API server, the pods' tokens
    ((got, port, args),) = started
    assert got == image
    assert built == []  # handed on by make run's prepare stage: not built twice
    assert launched["relay_ports"] == (port,)  # the compute API's bridge, reached from the real nodes
    # the caller's flags go to the chart as they are: no --leader-elect=false (the chart's two
    # replicas elect a leader) and no pull policy here (the chart's values add it)
    assert args == ["--workers=2"]


def test_without_an_image_the_chart_mode_builds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _, started, built = _chart_start(monkeypatch, None)
    assert built == ["built"]
    ((got, _, _),) = started
    assert got == ("realnode.local/nova-operator:abc", pathlib.Path("/cache/nova-operator-abc.tar"))


def test_with_the_local_operator_the_pool_nodes_are_real_with_the_sample_release_and_pull_if_not_present(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    launched, args = _launch_and_start(monkeypatch, real_nodes=True)
    assert launched["real_compute_nodes"] is True
    assert launched["pod_access"] is False
    assert launched["relay_ports"] == ()
    assert tuple(launched["real_node_releases"]) == (sample_release(),)
    assert tuple(launched["compute_nodes"]) == run.REAL_POOL_NODES
    assert set(launched["node_labels"]) == set(run.REAL_POOL_NODES)
    settings = parse_settings(args)
    assert settings.default_image_pull_policy == "IfNotPresent"
    assert not settings.leader_election.enabled
    assert args[-1] == "--workers=2"


def test_without_the_flag_the_nodes_stay_stand_ins_and_the_pull_policy_the_operators_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    launched, args = _launch_and_start(monkeypatch, real_nodes=False)
    assert launched["real_compute_nodes"] is False
    assert args == ["--leader-elect=false", "--workers=2"]
    assert parse_settings(args).default_image_pull_policy is None


def test_the_callers_pull_policy_wins() -> None:
    args = run.run_args(["--default-image-pull-policy", "Always"], real_nodes=True)
    assert parse_settings(args).default_image_pull_policy == "Always"


def test_real_nodes_are_refused_with_the_stand_ins() -> None:
    with pytest.raises(ValueError, match="stand-ins"):
        run.run_simulated(None, [], real=False, real_nodes=True)
    with pytest.raises(SystemExit):
        simcluster_main.main(["run", "--standins", "--real-compute-nodes"])
    with pytest.raises(SystemExit):
        prepare_main.main(["run", "--standins", "--real-compute-nodes"])


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], {"real_nodes": False, "local_operator": False, "operator_image": None, "all_real": False}),
        (
            ["--real-compute-nodes"],
            {"real_nodes": True, "local_operator": False, "operator_image": None, "all_real": False},
        ),
        (
            ["--real-compute-nodes", "--local-operator"],
            {"real_nodes": True, "local_operator": True, "operator_image": None, "all_real": False},
        ),
        (
            ["--real-compute-nodes", "--operator-image", "r/op:t", "--operator-image-archive", "/a.tar"],
            {
                "real_nodes": True,
                "local_operator": False,
                "operator_image": ("r/op:t", pathlib.Path("/a.tar")),
                "all_real": False,
            },
        ),
        (
            ["--all-real"],
            {"real_nodes": False, "local_operator": False, "operator_image": None, "all_real": True},
        ),
        (
            ["--all-real", "--operator-image", "r/op:t", "--operator-image-archive", "/a.tar"],
            {
                "real_nodes": False,
                "local_operator": False,
                "operator_image": ("r/op:t", pathlib.Path("/a.tar")),
                "all_real": True,
            },
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
    assert seen == [(pathlib.Path("/tmp/x"), ["--workers=2"], {"real": True, **expected})]


@pytest.mark.parametrize(
    "flags",
    [
        ["--local-operator"],
        ["--operator-image", "r/op:t", "--operator-image-archive", "/a.tar"],
        ["--real-compute-nodes", "--operator-image", "r/op:t"],
    ],
)
def test_simcluster_run_refuses_operator_flags_that_do_not_fit(
    monkeypatch: pytest.MonkeyPatch, flags: list[str]
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setattr(simcluster_main, "run_simulated", lambda *a, **k: pytest.fail("ran"))
    with pytest.raises(SystemExit, match="go"):
        simcluster_main.main(["run", *flags])


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


@pytest.mark.parametrize("flag", [True, False])
def test_prepare_run_builds_the_real_nodes_and_hands_the_flag_on(
    monkeypatch: pytest.MonkeyPatch, flag: bool
) -> None:
    plan, argv, _ = _prepare_run(monkeypatch, ["--real-compute-nodes"] if flag else [])
    assert plan["real_nodes"] is flag
    assert plan["chart"] is True  # only with real nodes does the plan act on it
    assert ("--real-compute-nodes" in argv) is flag
    assert "--local-operator" not in argv


def test_prepare_run_hands_on_the_built_operator_image_and_helm(monkeypatch: pytest.MonkeyPatch) -> None:
    built = {"ref": "realnode.local/nova-operator:0123", "archive": "/c/nova-operator-0123.tar", "layers": 3}
    noise = "I: mmdebstrap said {something} on stdout\n"
    outputs = {
        "operator-image": noise + json.dumps(built, indent=1),
        "deploytools": "go: downloading x\n/var/cache/nova-envtest/deploytools-v",
    }
    _, argv, env = _prepare_run(monkeypatch, ["--real-compute-nodes", "--", "--workers=2"], outputs)
    i = argv.index("--operator-image")
    assert argv[i : i + 4] == ["--operator-image", built["ref"], "--operator-image-archive", built["archive"]]
    assert argv[-2:] == ["--", "--workers=2"]
    assert env["DEPLOYTOOLS_BIN"] == "/var/cache/nova-envtest/deploytools-v"


def test_prepare_run_with_the_local_operator_builds_no_chart(monkeypatch: pytest.MonkeyPatch) -> None:
    plan, argv, env = _prepare_run(monkeypatch, ["--real-compute-nodes", "--local-operator"])
    assert plan["chart"] is False
    assert "--local-operator" in argv
    assert "--operator-image" not in argv
    assert "DEPLOYTOOLS_BIN" not in env


def test_prepare_run_refuses_the_local_operator_without_real_nodes() -> None:
    with pytest.raises(SystemExit):
        prepare_main.main(["run", "--local-operator"])


def test_last_json_skips_what_came_before_and_refuses_none() -> None:
    assert prepare_main.last_json('{"a": 1}\n{not json\n{"ref": "x",\n "n": 2}\n') == {"ref": "x", "n": "2"}
    with pytest.raises(ValueError, match="no JSON"):
        prepare_main.last_json("nothing\n")


def _keys(lanes: list[list[Any]]) -> list[list[str]]:
    return [[s.key for s in lane] for lane in lanes]


def test_the_plan_with_real_nodes_adds_their_binaries_and_the_sample_releases_oci_image() -> None:
    plain = run_plan(standins=False, kubeconfig=False, make_venv=False)
    real = run_plan(standins=False, kubeconfig=False, make_venv=False, real_nodes=True)
    assert _keys(real) == [[*_keys(plain)[0], "nova-oci-image"], [*_keys(plain)[1], "realnode"]]
    stages = {s.key: s for lane in real for s in lane}
    assert stages["nova-oci-image"].argv[-1] == sample_release()
    assert stages["realnode"].needs == ("apt",)


def test_the_plan_with_the_chart_builds_helm_and_the_operator_image_beside_the_other_lanes() -> None:
    local = run_plan(standins=False, kubeconfig=False, make_venv=False, real_nodes=True)
    chart = run_plan(standins=False, kubeconfig=False, make_venv=False, real_nodes=True, chart=True)
    assert _keys(chart) == [_keys(local)[0], [*_keys(local)[1], "deploytools"], ["operator-image"]]
    stages = {s.key: s for lane in chart for s in lane}
    image = stages["operator-image"]
    assert image.argv[-2:] == ("-m", "opimage")
    assert image.needs == ("apt",)  # buildah and mmdebstrap are Debian packages
    assert image.output
    assert stages["deploytools"].output
    # without real nodes the chart asks for nothing: the operator is a local process there
    assert run_plan(standins=False, kubeconfig=False, make_venv=False, chart=True) == run_plan(
        standins=False, kubeconfig=False, make_venv=False
    )


# -- REAL_NODES=all: every node real ------------------------------------------------------------


def test_make_run_real_nodes_1_asks_for_the_all_real_tier_and_mixed_for_the_mixed_one() -> None:
    import subprocess

    def dry(*assignments: str) -> str:
        done = subprocess.run(
            ["make", "-n", "--no-print-directory", "run", *assignments],
            capture_output=True,
            text=True,
            check=True,
            cwd=pathlib.Path(__file__).resolve().parents[3],
        )
        return done.stdout

    for value in ("1", "all"):
        assert "--all-real" in dry(f"REAL_NODES={value}")
        assert "--real-compute-nodes" not in dry(f"REAL_NODES={value}")
    assert "--real-compute-nodes" in dry("REAL_NODES=mixed")
    assert "--all-real" not in dry("REAL_NODES=mixed")
    # the local operator: the mixed tier (the all-real one refuses it)
    assert "--real-compute-nodes --local-operator" in dry("REAL_NODES=1", "LOCAL_OPERATOR=1")
    assert "--all-real" not in dry()
    assert "--real-compute-nodes" not in dry()


def _all_real_start(
    monkeypatch: pytest.MonkeyPatch, image: run.OperatorImage | None
) -> tuple[dict[str, Any], list[tuple[object, ...]], list[str]]:
    return _chart_start(monkeypatch, image, all_real=True)


def test_all_real_starts_every_node_real_with_every_release_and_the_chart_without_a_bridge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from simcluster.realtier.release_images import supported

    launched, started, built = _all_real_start(monkeypatch, None)
    assert tuple(launched["control_nodes"]) == ("control-0", "control-1")
    assert tuple(launched["compute_nodes"]) == run.REAL_POOL_NODES
    assert launched["node_labels"] == dict.fromkeys(run.REAL_POOL_NODES, run.POOL_NODE_LABELS)
    assert list(launched["releases"]) == supported()  # an upgrade of the sample finds its image
    assert len(supported()) > 1
    ((image, port, args),) = started
    assert built == ["built"]
    assert image == ("realnode.local/nova-operator:abc", pathlib.Path("/cache/nova-operator-abc.tar"))
    assert port is None  # no bridge: the operator's pods reach the compute API by its Service's name
    assert args == ["--workers=2"]


def test_all_real_refuses_the_local_operator_with_a_reason() -> None:
    with pytest.raises(ValueError, match="cannot resolve or reach the cluster's Services"):
        run.run_simulated(None, [], real=True, all_real=True, local_operator=True)
    with pytest.raises(SystemExit, match="REAL_NODES=1 LOCAL_OPERATOR=1 starts the mixed tier"):
        simcluster_main.main(["run", "--all-real", "--local-operator"])
    with pytest.raises(SystemExit):
        prepare_main.main(["run", "--all-real", "--local-operator"])
    with pytest.raises(SystemExit):
        prepare_main.main(["run", "--all-real", "--real-compute-nodes"])


def test_prepare_run_all_real_plans_it_and_hands_the_flag_on(monkeypatch: pytest.MonkeyPatch) -> None:
    plan, argv, _ = _prepare_run(monkeypatch, ["--all-real"])
    assert plan["all_real"] is True
    assert "--all-real" in argv
    assert "--real-compute-nodes" not in argv


def test_the_all_real_plan_builds_every_releases_images_the_nodes_helm_and_the_operator_image() -> None:
    from prepare.plans import all_releases

    chart = run_plan(standins=False, kubeconfig=False, make_venv=False, real_nodes=True, chart=True)
    every = run_plan(standins=False, kubeconfig=False, make_venv=False, all_real=True)
    assert _keys(every) == _keys(chart)
    stages = {s.key: s for lane in every for s in lane}
    for key in ("nova-venvs", "images", "nova-oci-image"):
        assert sample_release() not in stages[key].argv, key  # no release named: every release
        assert all(r in stages[key].title for r in all_releases()), stages[key].title
