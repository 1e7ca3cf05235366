"""kube-scheduler's default plugins in koordsched's profiles: weights, disabling, and start-up
naming the ones koordsched lacks (never dropped silently).

The lists of missing plugins are derived from the registry, so these tests hold as plugins are
added: a reduced registry stands for "not implemented" where a fixed answer is needed.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from koordsched.backends.sim.runner import simulate
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import default_config, load_config
from koordsched.config.names import UPSTREAM_DEFAULT_MULTIPOINT, UPSTREAM_DEFAULT_POINTS
from koordsched.framework.registry import Registry
from koordsched.plugins.registry import in_tree_registry

REPO = Path(__file__).resolve().parents[2]
PROFILES = [
    default_profile_path(),
    REPO / "config" / "koord-scheduler.yaml",
    REPO / "examples" / "profiles" / "koordinator-chart.yaml",
]


def without(*names: str) -> Registry:
    """The in-tree registry less ``names``: plugins that stand for not implemented ones."""
    return Registry([s for s in in_tree_registry() if s.name not in names])


def profile_yaml(plugins: str = "") -> bytes:
    body = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
    body += "  - schedulerName: koord-scheduler\n"
    if plugins:
        body += "    plugins:\n" + textwrap.indent(textwrap.dedent(plugins), "      ")
    return body.encode()


# --- the default set and its weights -------------------------------------------------------------


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name)
def test_profiles_score_with_the_upstream_default_weights(path: Path) -> None:
    profile = load_config(path, in_tree_registry()).profiles[0]
    weights = dict(profile.points["score"])
    assert weights["InterPodAffinity"] == 2
    assert weights["PodTopologySpread"] == 2
    assert weights["ImageLocality"] == 1
    for point in ("preFilter", "filter"):
        assert {"InterPodAffinity", "PodTopologySpread"} <= set(profile.plugins_at(point))


def test_default_config_runs_every_implemented_default_plugin() -> None:
    registry = in_tree_registry()
    profile = default_config(registry).profiles[0]
    implemented = [name for name, _ in UPSTREAM_DEFAULT_MULTIPOINT if name in registry]
    assert set(profile.enabled_plugins()) == set(implemented)
    upstream = dict(UPSTREAM_DEFAULT_MULTIPOINT)
    for name, weight in profile.points["score"]:
        assert weight == (upstream[name] or 1), name


def test_the_points_table_agrees_with_the_implemented_plugins() -> None:
    # A plugin may implement more than upstream's (a PreScore that only skips), never less.
    for spec in in_tree_registry():
        if spec.name in UPSTREAM_DEFAULT_POINTS:
            assert UPSTREAM_DEFAULT_POINTS[spec.name] <= spec.points, spec.name


@pytest.mark.parametrize(
    ("plugins", "gone", "score_left"),
    [
        (
            "multiPoint:\n  disabled: [{name: ImageLocality}]\n",
            {"ImageLocality"},
            {"InterPodAffinity", "PodTopologySpread"},
        ),
        ("score:\n  disabled: [{name: InterPodAffinity}]\n", set(), {"PodTopologySpread", "ImageLocality"}),
        ("score:\n  disabled: [{name: '*'}]\n", set(), set()),
        (
            "multiPoint:\n  disabled: [{name: InterPodAffinity}, {name: PodTopologySpread}]\n",
            {"InterPodAffinity", "PodTopologySpread"},
            {"ImageLocality"},
        ),
    ],
    ids=["multipoint-one", "score-one", "score-all", "multipoint-two"],
)
def test_a_profile_may_disable_them(plugins: str, gone: set[str], score_left: set[str]) -> None:
    profile = load_config(profile_yaml(plugins), in_tree_registry()).profiles[0]
    ours = {"InterPodAffinity", "PodTopologySpread", "ImageLocality"}
    assert not gone & set(profile.enabled_plugins())
    assert ours & set(profile.plugins_at("score")) == score_left
    if "InterPodAffinity" not in gone:
        assert "InterPodAffinity" in profile.plugins_at("filter")


# --- what is missing, by name --------------------------------------------------------------------


def test_missing_defaults_are_derived_from_the_registry() -> None:
    registry = in_tree_registry()
    missing = [name for name, _ in UPSTREAM_DEFAULT_MULTIPOINT if name not in registry]
    cfg = default_config(registry, "koord-scheduler")
    assert list(cfg.profiles[0].missing_defaults) == missing
    lines = cfg.not_implemented()
    if missing:
        assert lines == [
            f'profile "koord-scheduler": kube-scheduler\'s default plugins {", ".join(missing)} '
            "are not implemented by koordsched and do not run"
        ]
    else:
        assert lines == []


def test_a_plugin_left_out_of_the_registry_is_named() -> None:
    registry = without("ImageLocality", "InterPodAffinity")
    profile = default_config(registry).profiles[0]
    assert "ImageLocality" not in profile.enabled_plugins()
    assert {"InterPodAffinity", "ImageLocality"} <= set(profile.missing_defaults)
    # Upstream's order.
    order = [name for name, _ in UPSTREAM_DEFAULT_MULTIPOINT]
    assert list(profile.missing_defaults) == sorted(profile.missing_defaults, key=order.index)


@pytest.mark.parametrize(
    ("plugins", "named"),
    [
        ("", True),
        ("multiPoint:\n  disabled: [{name: ImageLocality}]\n", False),
        (
            "multiPoint:\n  disabled: [{name: '*'}]\nqueueSort:\n  enabled: [{name: PrioritySort}]\n"
            "bind:\n  enabled: [{name: DefaultBinder}]\n",
            False,
        ),
        # Score is ImageLocality's only extension point.
        ("score:\n  disabled: [{name: ImageLocality}]\n", False),
        ("score:\n  disabled: [{name: '*'}]\n", False),
        # Disabled elsewhere only: it would still score.
        ("filter:\n  disabled: [{name: ImageLocality}]\n", True),
        ("preScore:\n  disabled: [{name: '*'}]\n", True),
    ],
)
def test_a_missing_plugin_the_profile_disables_is_not_named(plugins: str, named: bool) -> None:
    cfg = load_config(profile_yaml(plugins), without("ImageLocality"))
    assert ("ImageLocality" in cfg.profiles[0].missing_defaults) is named
    assert any("ImageLocality" in line for line in cfg.not_implemented()) is named


def test_a_plugin_with_several_points_is_missing_until_disabled_at_all() -> None:
    registry = without("InterPodAffinity")
    partly = (
        "filter:\n  disabled: [{name: InterPodAffinity}]\nscore:\n  disabled: [{name: InterPodAffinity}]\n"
    )
    assert "InterPodAffinity" in load_config(profile_yaml(partly), registry).profiles[0].missing_defaults
    everywhere = (
        partly + "preFilter:\n  disabled: [{name: '*'}]\npreScore:\n  disabled: [{name: InterPodAffinity}]\n"
    )
    assert (
        "InterPodAffinity" not in load_config(profile_yaml(everywhere), registry).profiles[0].missing_defaults
    )


# --- start-up says so ----------------------------------------------------------------------------

NODE_AND_POD = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  schedulerName: koord-scheduler
  containers: [{name: c, image: app, resources: {requests: {cpu: 100m}}}]
"""


def test_simulate_names_the_missing_plugins(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(NODE_AND_POD)
    registry = without("ImageLocality")
    result = simulate([cluster], registry=registry)
    assert result.pod("default/p").node == "n1"
    (line,) = result.notices
    assert line.startswith('profile "koord-scheduler": kube-scheduler\'s default plugins ')
    assert "ImageLocality" in line and line.endswith("are not implemented by koordsched and do not run")
    # The in-tree registry: whatever it still lacks, by name.
    full = simulate([cluster])
    assert full.notices == load_config(default_profile_path(), in_tree_registry()).not_implemented()


def test_cli_simulate_prints_them_as_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from koordsched import cli
    from koordsched.backends.sim import runner

    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(NODE_AND_POD)
    monkeypatch.setattr(runner, "in_tree_registry", lambda **_: without("ImageLocality"))
    assert cli.main(["simulate", str(cluster)]) == 0
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if "are not implemented by koordsched" in line]
    assert len(warned) == 1 and warned[0].startswith('warning: profile "koord-scheduler"')
    assert "ImageLocality" in warned[0]
    # JSON: in the summary, by profile; nothing on stderr.
    assert cli.main(["simulate", str(cluster), "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    missing = json.loads(captured.out)["summary"]["notImplemented"]
    assert list(missing) == ["koord-scheduler"] and "ImageLocality" in missing["koord-scheduler"]
