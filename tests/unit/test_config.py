"""Loading KubeSchedulerConfiguration: defaults, upstream's merge and multiPoint rules, errors."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest

from koordsched.config import (
    UPSTREAM_DEFAULT_MULTIPOINT,
    ConfigError,
    DurationError,
    SchedulerConfig,
    default_config,
    load_config,
    parse_duration,
)
from koordsched.config.catalog import ArgsError, PluginArgs
from koordsched.config.types import POINT_FIELDS
from koordsched.framework.interface import EXTENSION_POINTS
from koordsched.framework.registry import PluginSpec, Registry

# --- a fake registry ---------------------------------------------------------------------------

#: Extension point -> the method a plugin class needs to implement it.
_METHOD = {
    "preEnqueue": "pre_enqueue",
    "queueSort": "sort_key",
    "preFilter": "pre_filter",
    "filter": "filter",
    "postFilter": "post_filter",
    "preScore": "pre_score",
    "score": "score",
    "reserve": "reserve",
    "permit": "permit",
    "preBind": "pre_bind",
    "bind": "bind",
    "postBind": "post_bind",
}


def _method(self: Any, *args: Any) -> None:
    return None


def _init(self: Any, args: Any, handle: Any) -> None:
    self.args = args
    self.handle = handle


def plugin(name: str, *points: str, args_type: type[PluginArgs] | None = None) -> PluginSpec:
    """A dummy plugin class named ``name`` with a method for each of ``points``."""
    body: dict[str, Any] = {"name": name, "__init__": _init}
    body.update({_METHOD[p]: _method for p in points})
    return PluginSpec.of(type(name, (), body), args_type)


class _ArgsBase(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    pass


class ResourceSpec(_ArgsBase):
    name: str
    weight: int = 1


class ScoringStrategy(_ArgsBase):
    type: str = "LeastAllocated"
    resources: list[ResourceSpec] = msgspec.field(
        default_factory=lambda: [ResourceSpec(name="cpu"), ResourceSpec(name="memory")]
    )


class NodeResourcesFitArgs(PluginArgs):
    ignored_resources: list[str] = []
    scoring_strategy: ScoringStrategy = msgspec.field(default_factory=ScoringStrategy)

    def validate(self) -> None:
        if self.scoring_strategy.type not in ("LeastAllocated", "MostAllocated"):
            raise ArgsError(f'scoringStrategy.type: unsupported "{self.scoring_strategy.type}"')


class CoschedulingArgs(PluginArgs):
    default_timeout: str = "600s"


class LoadAwareSchedulingArgs(PluginArgs):
    filter_expired_node_metrics: bool = True
    node_metric_expiration_seconds: int = 180
    resource_weights: dict[str, int] = {}
    usage_thresholds: dict[str, int] = {}
    estimated_scaling_factors: dict[str, int] = {}


class ElasticQuotaArgs(PluginArgs):
    quota_group_namespace: str = "koordinator-system"


class BrokenArgs(PluginArgs):
    def validate(self) -> None:
        raise ArgsError("always wrong")


#: Part of upstream's defaults: enough to see ordering, filtering and weights.
BASE_SPECS = [
    plugin("SchedulingGates", "preEnqueue"),
    plugin("PrioritySort", "queueSort"),
    plugin("NodeUnschedulable", "filter"),
    plugin("TaintToleration", "filter", "preScore", "score"),
    plugin("NodeAffinity", "preFilter", "filter", "preScore", "score"),
    plugin("NodeResourcesFit", "preFilter", "filter", "preScore", "score", args_type=NodeResourcesFitArgs),
    plugin("PodTopologySpread", "preFilter", "filter", "preScore", "score"),
    plugin("DefaultPreemption", "postFilter"),
    plugin("NodeResourcesBalancedAllocation", "preScore", "score"),
    plugin("ImageLocality", "score"),
    plugin("DefaultBinder", "bind"),
]
#: Not an upstream name: a plugin only this test registry has.
EXTRA = plugin("Extra", "filter", "score")

KOORD_SPECS = [
    plugin(
        "Coscheduling",
        "preEnqueue",
        "queueSort",
        "preFilter",
        "postFilter",
        "reserve",
        "permit",
        "postBind",
        args_type=CoschedulingArgs,
    ),
    plugin(
        "Reservation", "preFilter", "filter", "postFilter", "preScore", "score", "reserve", "preBind", "bind"
    ),
    plugin("NodeNUMAResource", "preFilter", "filter", "score", "reserve", "preBind"),
    plugin("DeviceShare", "preFilter", "filter", "score", "reserve", "preBind"),
    plugin("ElasticQuota", "preFilter", "postFilter", "reserve", args_type=ElasticQuotaArgs),
    plugin("LoadAwareScheduling", "filter", "score", "reserve", args_type=LoadAwareSchedulingArgs),
    plugin("DefaultPreBind", "preBind"),
]

REG = Registry([*BASE_SPECS, EXTRA])
KOORD_REG = Registry([*BASE_SPECS, *KOORD_SPECS])

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def load(body: str, registry: Registry = REG, header: str = HEADER) -> SchedulerConfig:
    return load_config((header + textwrap.dedent(body)).encode(), registry)


def names(cfg: SchedulerConfig, point: str, profile: int = 0) -> list[str]:
    return cfg.profiles[profile].plugins_at(point)


# --- defaults ----------------------------------------------------------------------------------

DEFAULT_POINTS: dict[str, list[tuple[str, int]]] = {
    "preEnqueue": [("SchedulingGates", 1)],
    "queueSort": [("PrioritySort", 1)],
    "preFilter": [("NodeAffinity", 1), ("NodeResourcesFit", 1), ("PodTopologySpread", 1)],
    "filter": [
        ("NodeUnschedulable", 1),
        ("TaintToleration", 1),
        ("NodeAffinity", 1),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 1),
    ],
    "postFilter": [("DefaultPreemption", 1)],
    "preScore": [
        ("TaintToleration", 1),
        ("NodeAffinity", 1),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 1),
        ("NodeResourcesBalancedAllocation", 1),
    ],
    "score": [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 2),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
    ],
    "reserve": [],
    "permit": [],
    "preBind": [],
    "bind": [("DefaultBinder", 1)],
    "postBind": [],
}


def test_point_names_match_the_framework() -> None:
    assert list(POINT_FIELDS) == list(EXTENSION_POINTS)


def test_upstream_default_list_is_kept_whole() -> None:
    assert len(UPSTREAM_DEFAULT_MULTIPOINT) == 21
    assert UPSTREAM_DEFAULT_MULTIPOINT[0] == ("SchedulingGates", None)
    assert UPSTREAM_DEFAULT_MULTIPOINT[-1] == ("DefaultBinder", None)
    assert dict(UPSTREAM_DEFAULT_MULTIPOINT)["TaintToleration"] == 3


def test_default_config() -> None:
    cfg = default_config(REG)
    assert cfg.source == "<defaults>"
    assert [p.scheduler_name for p in cfg.profiles] == ["default-scheduler"]
    profile = cfg.profiles[0]
    assert profile.points == DEFAULT_POINTS
    assert profile.percentage_of_nodes_to_score is None
    assert profile.args == {"NodeResourcesFit": NodeResourcesFitArgs()}
    assert profile.enabled_plugins() == [
        "SchedulingGates",
        "PrioritySort",
        "NodeAffinity",
        "NodeResourcesFit",
        "PodTopologySpread",
        "NodeUnschedulable",
        "TaintToleration",
        "DefaultPreemption",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
        "DefaultBinder",
    ]
    assert cfg.parallelism == 16
    assert cfg.percentage_of_nodes_to_score == 0
    assert (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (1.0, 10.0)
    le = cfg.leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period) == (True, 15.0, 10.0, 2.0)
    assert (le.resource_lock, le.resource_name, le.resource_namespace) == (
        "leases",
        "kube-scheduler",
        "kube-system",
    )
    cc = cfg.client_connection
    assert (cc.qps, cc.burst, cc.kubeconfig) == (50.0, 100, "")


def test_default_config_named() -> None:
    assert default_config(REG, "koordsched").profiles[0].scheduler_name == "koordsched"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("", id="no-profiles"),
        pytest.param("profiles: []\n", id="empty-profiles"),
        pytest.param("profiles: [{}]\n", id="unnamed-profile"),
        pytest.param("profiles:\n- schedulerName: default-scheduler\n", id="named-profile"),
        pytest.param("profiles:\n- plugins:\n", id="null-plugins"),
    ],
)
def test_minimal_configs_give_the_default_profile(body: str) -> None:
    cfg = load(body)
    assert cfg.source == "<bytes>"
    assert [p.scheduler_name for p in cfg.profiles] == ["default-scheduler"]
    assert cfg.profiles[0].points == DEFAULT_POINTS


def test_v1beta3_and_json() -> None:
    v1beta3 = load("", header=HEADER.replace("/v1\n", "/v1beta3\n"))
    assert v1beta3.raw.api_version == "kubescheduler.config.k8s.io/v1beta3"
    assert v1beta3.profiles[0].points == DEFAULT_POINTS
    json_cfg = load_config(
        b'{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",'
        b' "parallelism": 4, "profiles": [{"schedulerName": "j"}]}',
        REG,
    )
    assert json_cfg.parallelism == 4
    assert json_cfg.profiles[0].scheduler_name == "j"


def test_unregistered_defaults_are_left_out() -> None:
    small = Registry([plugin("PrioritySort", "queueSort"), plugin("DefaultBinder", "bind")])
    cfg = default_config(small)
    assert cfg.profiles[0].enabled_plugins() == ["PrioritySort", "DefaultBinder"]


# --- merge and multiPoint expansion ------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "point", "expected"),
    [
        pytest.param(
            """
            profiles:
            - plugins:
                multiPoint: {enabled: [{name: Extra, weight: 4}]}
            """,
            "score",
            [n for n, _ in DEFAULT_POINTS["score"]] + ["Extra"],
            id="custom-multipoint-appended",
        ),
        pytest.param(
            """
            profiles:
            - plugins:
                filter: {enabled: [{name: Extra}]}
            """,
            "filter",
            [n for n, _ in DEFAULT_POINTS["filter"]] + ["Extra"],
            id="explicit-after-multipoint-only",
        ),
        pytest.param(
            """
            profiles:
            - plugins:
                filter: {enabled: [{name: Extra}, {name: PodTopologySpread}, {name: NodeAffinity}]}
            """,
            "filter",
            [
                "PodTopologySpread",
                "NodeAffinity",
                "NodeUnschedulable",
                "TaintToleration",
                "NodeResourcesFit",
                "Extra",
            ],
            id="explicit-override-moves-first",
        ),
        pytest.param(
            """
            profiles:
            - plugins:
                filter: {disabled: [{name: TaintToleration}]}
            """,
            "filter",
            ["NodeUnschedulable", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread"],
            id="disabled-at-one-point",
        ),
        pytest.param(
            """
            profiles:
            - plugins:
                filter: {disabled: [{name: "*"}], enabled: [{name: Extra}, {name: NodeAffinity}]}
            """,
            "filter",
            ["Extra", "NodeAffinity"],
            id="disabled-star-at-one-point",
        ),
        pytest.param(
            """
            profiles:
            - plugins:
                multiPoint: {disabled: [{name: TaintToleration}]}
            """,
            "score",
            [
                "NodeAffinity",
                "NodeResourcesFit",
                "PodTopologySpread",
                "NodeResourcesBalancedAllocation",
                "ImageLocality",
            ],
            id="disabled-in-multipoint",
        ),
        pytest.param(
            """
            profiles:
            - plugins:
                filter: {disabled: [{name: TaintToleration}], enabled: [{name: TaintToleration}]}
            """,
            "filter",
            ["NodeUnschedulable", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread", "TaintToleration"],
            id="disabled-and-reenabled",
        ),
        pytest.param(
            """
            profiles:
            - plugins:
                filter: {disabled: [{name: VolumeBinding}, {name: NodePorts}]}
            """,
            "filter",
            [n for n, _ in DEFAULT_POINTS["filter"]],
            id="disabling-unimplemented-well-known-is-fine",
        ),
        pytest.param(
            """
            profiles:
            - plugins:
                multiPoint:
                  disabled: [{name: "*"}]
                  enabled: [{name: PrioritySort}, {name: DefaultBinder}, {name: Extra}]
            """,
            "filter",
            ["Extra"],
            id="multipoint-disabled-star",
        ),
        pytest.param(
            """
            profiles:
            - plugins:
                multiPoint: {enabled: [{name: NodeAffinity, weight: 9}]}
            """,
            "filter",
            [n for n, _ in DEFAULT_POINTS["filter"]],
            id="multipoint-replace-in-place-keeps-order",
        ),
    ],
)
def test_plugin_order(body: str, point: str, expected: list[str]) -> None:
    assert names(load(body), point) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            """
            profiles:
            - plugins:
                multiPoint: {enabled: [{name: TaintToleration, weight: 7}]}
            """,
            {"TaintToleration": 7, "NodeAffinity": 2},
            id="multipoint-replaces-default-weight",
        ),
        pytest.param(
            """
            profiles:
            - plugins:
                score: {enabled: [{name: TaintToleration, weight: 9}]}
            """,
            {"TaintToleration": 9},
            id="explicit-score-weight-wins",
        ),
        pytest.param(
            """
            profiles:
            - plugins:
                score: {enabled: [{name: TaintToleration}]}
            """,
            {"TaintToleration": 1},
            id="explicit-score-without-weight-is-1",
        ),
        pytest.param(
            """
            profiles:
            - plugins:
                score: {enabled: [{name: NodeAffinity, weight: 0}]}
                multiPoint: {enabled: [{name: Extra, weight: 0}]}
            """,
            {"NodeAffinity": 1, "Extra": 1},
            id="zero-is-1",
        ),
        pytest.param(
            """
            profiles:
            - plugins:
                multiPoint: {enabled: [{name: Extra}]}
                filter: {enabled: [{name: Extra, weight: 50}]}
            """,
            {"Extra": 1},
            id="weight-elsewhere-is-ignored",
        ),
    ],
)
def test_score_weights(body: str, expected: dict[str, int]) -> None:
    cfg = load(body)
    weights = dict(cfg.profiles[0].points["score"])
    assert {name: weights[name] for name in expected} == expected
    assert all(w == 1 for point, ps in cfg.profiles[0].points.items() if point != "score" for _, w in ps)


def test_explicit_override_keeps_its_position_among_overrides() -> None:
    cfg = load(
        """
        profiles:
        - plugins:
            score:
              enabled:
              - {name: Extra, weight: 5}
              - {name: ImageLocality, weight: 4}
              - {name: TaintToleration}
        """
    )
    assert cfg.profiles[0].points["score"] == [
        ("ImageLocality", 4),
        ("TaintToleration", 1),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 2),
        ("NodeResourcesBalancedAllocation", 1),
        ("Extra", 5),
    ]


def test_several_profiles() -> None:
    cfg = load(
        """
        profiles:
        - schedulerName: a
          percentageOfNodesToScore: 30
        - schedulerName: b
          plugins:
            score: {disabled: [{name: "*"}]}
        """
    )
    assert [p.scheduler_name for p in cfg.profiles] == ["a", "b"]
    assert cfg.profiles[0].percentage_of_nodes_to_score == 30
    assert names(cfg, "score", 1) == []
    assert cfg.profile("b") is cfg.profiles[1]
    assert cfg.profile("c") is None


# --- plugin args --------------------------------------------------------------------------------


def test_plugin_args_decoded_and_defaulted() -> None:
    cfg = load(
        """
        profiles:
        - pluginConfig:
          - name: NodeResourcesFit
            args:
              kind: NodeResourcesFitArgs
              apiVersion: kubescheduler.config.k8s.io/v1beta3
              scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 3}]}
          - name: Coscheduling
            args: {defaultTimeout: 30s}
          - name: PrioritySort
            args: {kind: PrioritySortArgs}
        """,
        KOORD_REG,
    )
    args = cfg.profiles[0].args
    fit = args["NodeResourcesFit"]
    assert isinstance(fit, NodeResourcesFitArgs)
    assert fit.scoring_strategy == ScoringStrategy(
        type="MostAllocated", resources=[ResourceSpec(name="cpu", weight=3)]
    )
    assert fit.kind == "NodeResourcesFitArgs"
    # Coscheduling is configured but not enabled in this profile: checked, not kept.
    assert "Coscheduling" not in args


def test_leader_election_and_client_settings() -> None:
    cfg = load(
        """
        leaderElection:
          leaseDuration: 1m30s
          renewDeadline: 500ms
          retryPeriod: 100ms
          resourceName: ""
          resourceNamespace: 2024-01-01
        clientConnection: {qps: 0, burst: 0, kubeconfig: /k}
        """
    )
    le = cfg.leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (90.0, 0.5, 0.1)
    assert le.resource_name == "kube-scheduler"
    assert le.resource_namespace == "2024-01-01"
    assert (cfg.client_connection.qps, cfg.client_connection.burst) == (50.0, 100)
    assert cfg.client_connection.kubeconfig == "/k"


def test_zero_durations_take_defaults_and_off_skips_checks() -> None:
    cfg = load("leaderElection: {leaderElect: false, leaseDuration: 0s, resourceLock: endpoints}\n")
    assert cfg.leader_election.lease_duration == 15.0
    assert cfg.leader_election.resource_lock == "endpoints"


# --- Koordinator's chart -------------------------------------------------------------------------

KOORD_CHART = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  resourceLock: leases
  resourceName: koord-scheduler
  resourceNamespace: koordinator-system
profiles:
  - pluginConfig:
    - name: NodeResourcesFit
      args:
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: NodeResourcesFitArgs
        scoringStrategy:
          type: LeastAllocated
          resources:
            - name: cpu
              weight: 1
            - name: memory
              weight: 1
            - name: "kubernetes.io/batch-cpu"
              weight: 1
            - name: "kubernetes.io/batch-memory"
              weight: 1
    - name: LoadAwareScheduling
      args:
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: LoadAwareSchedulingArgs
        filterExpiredNodeMetrics: false
        nodeMetricExpirationSeconds: 300
        resourceWeights:
          cpu: 1
          memory: 1
        usageThresholds:
          cpu: 65
          memory: 95
        # prodUsageThresholds:
        #   cpu: 55
        # scoreAccordingProdUsage: true
        estimatedScalingFactors:
          cpu: 85
          memory: 70
    - name: ElasticQuota
      args:
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: ElasticQuotaArgs
        quotaGroupNamespace: koordinator-system
    plugins:
      queueSort:
        disabled:
          - name: "*"
        enabled:
          - name: Coscheduling
      preFilter:
        enabled:
          - name: Coscheduling
          - name: Reservation
          - name: NodeNUMAResource
          - name: DeviceShare
          - name: ElasticQuota
      filter:
        enabled:
          - name: Reservation
          - name: LoadAwareScheduling
          - name: NodeNUMAResource
          - name: DeviceShare
      postFilter:
        disabled:
          - name: "*"
        enabled:
          - name: Reservation
          - name: Coscheduling
          - name: ElasticQuota
          - name: DefaultPreemption
      preScore:
        enabled:
          - name: Reservation # The Reservation plugin must come first
      score:
        enabled:
          - name: LoadAwareScheduling
            weight: 1
          - name: NodeNUMAResource
            weight: 1
          - name: DeviceShare
            weight: 1
          - name: Reservation
            weight: 5000
      reserve:
        enabled:
          - name: Reservation
          - name: LoadAwareScheduling
          - name: NodeNUMAResource
          - name: DeviceShare
          - name: Coscheduling
          - name: ElasticQuota
      permit:
        enabled:
          - name: Coscheduling
      preBind:
        enabled:
          - name: NodeNUMAResource
          - name: DeviceShare
          - name: Reservation
          - name: DefaultPreBind
      bind:
        disabled:
          - name: "*"
        enabled:
          - name: Reservation
          - name: DefaultBinder
      postBind:
        enabled:
          - name: Coscheduling
    schedulerName: koord-scheduler
"""

KOORD_POINTS: dict[str, list[tuple[str, int]]] = {
    "preEnqueue": [("SchedulingGates", 1)],
    "queueSort": [("Coscheduling", 1)],
    "preFilter": [
        ("NodeAffinity", 1),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 1),
        ("Coscheduling", 1),
        ("Reservation", 1),
        ("NodeNUMAResource", 1),
        ("DeviceShare", 1),
        ("ElasticQuota", 1),
    ],
    "filter": [
        ("NodeUnschedulable", 1),
        ("TaintToleration", 1),
        ("NodeAffinity", 1),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 1),
        ("Reservation", 1),
        ("LoadAwareScheduling", 1),
        ("NodeNUMAResource", 1),
        ("DeviceShare", 1),
    ],
    "postFilter": [("Reservation", 1), ("Coscheduling", 1), ("ElasticQuota", 1), ("DefaultPreemption", 1)],
    # Upstream expansion puts the multiPoint defaults before the explicit entries.
    "preScore": [
        ("TaintToleration", 1),
        ("NodeAffinity", 1),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 1),
        ("NodeResourcesBalancedAllocation", 1),
        ("Reservation", 1),
    ],
    "score": [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 2),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("LoadAwareScheduling", 1),
        ("NodeNUMAResource", 1),
        ("DeviceShare", 1),
        ("Reservation", 5000),
    ],
    "reserve": [
        ("Reservation", 1),
        ("LoadAwareScheduling", 1),
        ("NodeNUMAResource", 1),
        ("DeviceShare", 1),
        ("Coscheduling", 1),
        ("ElasticQuota", 1),
    ],
    "permit": [("Coscheduling", 1)],
    "preBind": [("NodeNUMAResource", 1), ("DeviceShare", 1), ("Reservation", 1), ("DefaultPreBind", 1)],
    "bind": [("Reservation", 1), ("DefaultBinder", 1)],
    "postBind": [("Coscheduling", 1)],
}


@pytest.mark.parametrize("version", ["v1", "v1beta3"])
def test_koordinator_chart_loads(tmp_path: Path, version: str) -> None:
    path = tmp_path / "koord-scheduler-config.yaml"
    path.write_text(KOORD_CHART.replace("config.k8s.io/v1\n", f"config.k8s.io/{version}\n"))
    cfg = load_config(path, KOORD_REG)
    assert cfg.source == str(path)
    assert cfg.raw.api_version == f"kubescheduler.config.k8s.io/{version}"
    le = cfg.leader_election
    assert (le.resource_name, le.resource_namespace, le.resource_lock) == (
        "koord-scheduler",
        "koordinator-system",
        "leases",
    )
    (profile,) = cfg.profiles
    assert profile.scheduler_name == "koord-scheduler"
    assert profile.points == KOORD_POINTS
    assert set(profile.args) == {"NodeResourcesFit", "LoadAwareScheduling", "ElasticQuota", "Coscheduling"}
    load_aware = profile.args["LoadAwareScheduling"]
    assert isinstance(load_aware, LoadAwareSchedulingArgs)
    assert load_aware.filter_expired_node_metrics is False
    assert load_aware.usage_thresholds == {"cpu": 65, "memory": 95}
    assert profile.args["Coscheduling"] == CoschedulingArgs()
    fit = profile.args["NodeResourcesFit"]
    assert isinstance(fit, NodeResourcesFitArgs)
    assert [r.name for r in fit.scoring_strategy.resources][2:] == [
        "kubernetes.io/batch-cpu",
        "kubernetes.io/batch-memory",
    ]


def test_koordinator_chart_names_missing_plugins() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(KOORD_CHART.encode(), REG)
    assert info.value.where == "profiles[0].plugins.queueSort.enabled[0]"
    assert info.value.detail == 'plugin "Coscheduling" is not implemented by koordsched'


# --- durations ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15s", 15.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("2h", 7200.0),
        ("1.5h", 5400.0),
        ("-1s", -1.0),
        ("+2s", 2.0),
        ("0", 0.0),
        ("1h2m3s4ms", 3723.004),
        ("10us", 1e-5),
        ("10\u00b5s", 1e-5),
        ("3ns", 3e-9),
        (".5s", 0.5),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["15", "", "s", "1x", "1s2", " 1s", "1 s", "1.s.", "--1s", "1S"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(DurationError, match="invalid duration"):
        parse_duration(text)


# --- errors ----------------------------------------------------------------------------------------

PROFILE_PLUGINS = "profiles:\n- plugins:\n"

ERROR_CASES = [
    # (id, full document, registry, where, fragment of detail)
    ("yaml-syntax", HEADER + "profiles: [\n", REG, "line 4, column 1", "expected"),
    (
        "duplicate-key",
        HEADER + "parallelism: 1\nparallelism: 2\n",
        REG,
        "line 4, column 1",
        'duplicate key "parallelism"',
    ),
    (
        "duplicate-nested-key",
        HEADER + "leaderElection:\n  resourceName: a\n  resourceName: b\n",
        REG,
        "line 5, column 3",
        'duplicate key "resourceName"',
    ),
    ("not-a-mapping", "- a\n- b\n", REG, "document", "must be a mapping, got a list"),
    ("two-documents", HEADER + "---\n" + HEADER, REG, "document", "expected one YAML document, found 2"),
    ("empty", "# nothing\n", REG, "document", "the config is empty"),
    ("no-api-version", "kind: KubeSchedulerConfiguration\n", REG, "apiVersion", "missing"),
    (
        "wrong-api-version",
        HEADER.replace("/v1\n", "/v1beta2\n"),
        REG,
        "apiVersion",
        'got "kubescheduler.config.k8s.io/v1beta2"',
    ),
    (
        "wrong-kind",
        HEADER.replace("kind: KubeSchedulerConfiguration", "kind: Policy"),
        REG,
        "kind",
        'got "Policy"',
    ),
    (
        "unknown-top-field",
        HEADER + "koordsched: {}\n",
        REG,
        "KubeSchedulerConfiguration",
        "unknown field `koordsched`",
    ),
    (
        "unknown-nested-field",
        HEADER + PROFILE_PLUGINS + "    filters: {}\n",
        REG,
        "profiles[0].plugins",
        "unknown field `filters`",
    ),
    ("camel-case-is-exact", HEADER + "Parallelism: 3\n", REG, "KubeSchedulerConfiguration", "`Parallelism`"),
    ("wrong-type", HEADER + "parallelism: many\n", REG, "parallelism", "Expected `int`, got `str`"),
    (
        "missing-plugin-name",
        HEADER + PROFILE_PLUGINS + "    filter: {enabled: [{weight: 1}]}\n",
        REG,
        "profiles[0].plugins.filter.enabled[0]",
        "missing required field `name`",
    ),
    (
        "extenders",
        HEADER + "extenders: [{urlPrefix: http://x}]\n",
        REG,
        "extenders",
        "extenders are not supported",
    ),
    ("parallelism-zero", HEADER + "parallelism: 0\n", REG, "parallelism", "must be greater than 0"),
    (
        "percentage-high",
        HEADER + "percentageOfNodesToScore: 101\n",
        REG,
        "percentageOfNodesToScore",
        "0..100",
    ),
    (
        "percentage-negative",
        HEADER + "percentageOfNodesToScore: -1\n",
        REG,
        "percentageOfNodesToScore",
        "0..100",
    ),
    (
        "profile-percentage",
        HEADER + "profiles:\n- percentageOfNodesToScore: 150\n",
        REG,
        "profiles[0].percentageOfNodesToScore",
        "0..100",
    ),
    (
        "initial-backoff",
        HEADER + "podInitialBackoffSeconds: 0\n",
        REG,
        "podInitialBackoffSeconds",
        "greater than 0",
    ),
    (
        "max-backoff",
        HEADER + "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 4\n",
        REG,
        "podMaxBackoffSeconds",
        "must be >= podInitialBackoffSeconds",
    ),
    ("qps", HEADER + "clientConnection: {qps: -1}\n", REG, "clientConnection.qps", "must not be negative"),
    (
        "burst",
        HEADER + "clientConnection: {burst: -1}\n",
        REG,
        "clientConnection.burst",
        "must not be negative",
    ),
    (
        "duration-syntax",
        HEADER + "leaderElection: {leaseDuration: '15'}\n",
        REG,
        "leaderElection.leaseDuration",
        'invalid duration "15"',
    ),
    (
        "duration-type",
        HEADER + "leaderElection: {leaseDuration: 15}\n",
        REG,
        "leaderElection.leaseDuration",
        "Expected `str`, got `int`",
    ),
    (
        "lease-negative",
        HEADER + "leaderElection: {leaseDuration: -1s}\n",
        REG,
        "leaderElection.leaseDuration",
        "greater than 0",
    ),
    (
        "renew-negative",
        HEADER + "leaderElection: {renewDeadline: -1s}\n",
        REG,
        "leaderElection.renewDeadline",
        "greater than 0",
    ),
    (
        "retry-negative",
        HEADER + "leaderElection: {retryPeriod: -2s}\n",
        REG,
        "leaderElection.retryPeriod",
        "greater than 0",
    ),
    (
        "lease-not-above-renew",
        HEADER + "leaderElection: {leaseDuration: 10s}\n",
        REG,
        "leaderElection.leaseDuration",
        "must be greater than renewDeadline",
    ),
    (
        "renew-vs-retry-jitter",
        HEADER + "leaderElection: {renewDeadline: 2400ms, retryPeriod: 2s}\n",
        REG,
        "leaderElection.renewDeadline",
        "retryPeriod * 1.2",
    ),
    (
        "resource-lock",
        HEADER + "leaderElection: {resourceLock: configmapsleases}\n",
        REG,
        "leaderElection.resourceLock",
        'must be "leases"',
    ),
    (
        "profile-name-required",
        HEADER + "profiles:\n- schedulerName: a\n- {}\n",
        REG,
        "profiles[1].schedulerName",
        "required",
    ),
    (
        "profile-name-duplicate",
        HEADER + "profiles:\n- schedulerName: a\n- schedulerName: a\n",
        REG,
        "profiles[1].schedulerName",
        'duplicate "a" (also profiles[0])',
    ),
    (
        "unknown-plugin",
        HEADER + PROFILE_PLUGINS + "    filter: {enabled: [{name: Extra}, {name: Foo}]}\n",
        REG,
        "profiles[0].plugins.filter.enabled[1]",
        'unknown plugin "Foo"',
    ),
    (
        "typo-gets-a-hint",
        HEADER + PROFILE_PLUGINS + "    filter: {enabled: [{name: NodeAfinity}]}\n",
        REG,
        "profiles[0].plugins.filter.enabled[0]",
        'unknown plugin "NodeAfinity" (did you mean "NodeAffinity"?)',
    ),
    (
        "not-implemented",
        HEADER + PROFILE_PLUGINS + "    filter: {enabled: [{name: VolumeBinding}]}\n",
        REG,
        "profiles[0].plugins.filter.enabled[0]",
        'plugin "VolumeBinding" is not implemented by koordsched',
    ),
    (
        "not-implemented-koordinator",
        HEADER + PROFILE_PLUGINS + "    multiPoint: {enabled: [{name: Extra}, {name: DeviceShare}]}\n",
        REG,
        "profiles[0].plugins.multiPoint.enabled[1]",
        'plugin "DeviceShare" is not implemented by koordsched',
    ),
    (
        "unknown-disabled",
        HEADER + PROFILE_PLUGINS + "    score: {disabled: [{name: '*'}, {name: ImageLocalty}]}\n",
        REG,
        "profiles[0].plugins.score.disabled[1]",
        'unknown plugin "ImageLocalty"',
    ),
    (
        "unknown-disabled-multipoint",
        HEADER + PROFILE_PLUGINS + "    multiPoint: {disabled: [{name: Bogus}]}\n",
        REG,
        "profiles[0].plugins.multiPoint.disabled[0]",
        'unknown plugin "Bogus"',
    ),
    (
        "wrong-point",
        HEADER + PROFILE_PLUGINS + "    score: {enabled: [{name: DefaultBinder}]}\n",
        REG,
        "profiles[0].plugins.score.enabled[0]",
        'plugin "DefaultBinder" does not implement score',
    ),
    (
        "duplicate-at-point",
        HEADER
        + PROFILE_PLUGINS
        + "    filter: {enabled: [{name: Extra}, {name: NodeAffinity}, {name: Extra}]}\n",
        REG,
        "profiles[0].plugins.filter.enabled[2]",
        'plugin "Extra" is enabled twice (also at profiles[0].plugins.filter.enabled[0])',
    ),
    (
        "duplicate-in-multipoint",
        HEADER
        + PROFILE_PLUGINS
        + "    multiPoint: {enabled: [{name: ImageLocality}, {name: ImageLocality}]}\n",
        REG,
        "profiles[0].plugins.multiPoint.enabled[1]",
        "enabled twice",
    ),
    (
        "negative-weight",
        HEADER + PROFILE_PLUGINS + "    score: {enabled: [{name: Extra, weight: -1}]}\n",
        REG,
        "profiles[0].plugins.score.enabled[0].weight",
        "must not be negative",
    ),
    (
        "huge-weight",
        HEADER + PROFILE_PLUGINS + "    multiPoint: {enabled: [{name: Extra, weight: 2147483648}]}\n",
        REG,
        "profiles[0].plugins.multiPoint.enabled[0].weight",
        "int32",
    ),
    (
        "no-queue-sort",
        HEADER + PROFILE_PLUGINS + "    queueSort: {disabled: [{name: '*'}]}\n",
        REG,
        "profiles[0].plugins.queueSort",
        "exactly one queue sort plugin is required, got none",
    ),
    (
        "two-queue-sorts",
        HEADER + PROFILE_PLUGINS + "    queueSort: {enabled: [{name: Coscheduling}]}\n",
        KOORD_REG,
        "profiles[0].plugins.queueSort",
        'got "PrioritySort", "Coscheduling"',
    ),
    (
        "no-bind",
        HEADER + PROFILE_PLUGINS + "    bind: {disabled: [{name: '*'}]}\n",
        REG,
        "profiles[0].plugins.bind",
        "at least one bind plugin is required",
    ),
    (
        "queue-sort-differs",
        HEADER
        + "profiles:\n- schedulerName: a\n- schedulerName: b\n  plugins:\n"
        + "    queueSort: {disabled: [{name: '*'}], enabled: [{name: Coscheduling}]}\n",
        KOORD_REG,
        "profiles[1].plugins.queueSort",
        "must be the same for all profiles",
    ),
    (
        "queue-sort-args-differ",
        HEADER
        + "profiles:\n"
        + "- schedulerName: a\n  plugins: &p\n"
        + "    queueSort: {disabled: [{name: '*'}], enabled: [{name: Coscheduling}]}\n"
        + "- schedulerName: b\n  plugins: *p\n"
        + "  pluginConfig: [{name: Coscheduling, args: {defaultTimeout: 1s}}]\n",
        KOORD_REG,
        "profiles[1].pluginConfig[0].args",
        "queue sort args must be the same for all profiles",
    ),
    (
        "queue-sort-args-differ-from-configured",
        HEADER
        + "profiles:\n"
        + "- schedulerName: a\n  plugins: &p\n"
        + "    queueSort: {disabled: [{name: '*'}], enabled: [{name: Coscheduling}]}\n"
        + "  pluginConfig: [{name: Coscheduling, args: {defaultTimeout: 1s}}]\n"
        + "- schedulerName: b\n  plugins: *p\n",
        KOORD_REG,
        "profiles[1].pluginConfig",
        "queue sort args must be the same for all profiles",
    ),
    (
        "plugin-config-duplicate",
        HEADER + "profiles:\n- pluginConfig: [{name: NodeResourcesFit}, {name: NodeResourcesFit}]\n",
        REG,
        "profiles[0].pluginConfig[1].name",
        'duplicate config for plugin "NodeResourcesFit" (also at pluginConfig[0])',
    ),
    (
        "plugin-config-unknown",
        HEADER + "profiles:\n- pluginConfig: [{name: Nope, args: {}}]\n",
        REG,
        "profiles[0].pluginConfig[0].name",
        'unknown plugin "Nope"',
    ),
    (
        "plugin-config-not-implemented",
        HEADER + "profiles:\n- pluginConfig: [{name: LoadAwareScheduling, args: {}}]\n",
        REG,
        "profiles[0].pluginConfig[0].name",
        'plugin "LoadAwareScheduling" is not implemented by koordsched',
    ),
    (
        "args-kind",
        HEADER + "profiles:\n- pluginConfig: [{name: NodeResourcesFit, args: {kind: NodeAffinityArgs}}]\n",
        REG,
        "profiles[0].pluginConfig[0].args.kind",
        'must be "NodeResourcesFitArgs" for plugin "NodeResourcesFit", got "NodeAffinityArgs"',
    ),
    (
        "args-api-version",
        HEADER + "profiles:\n- pluginConfig: [{name: NodeResourcesFit, args: {apiVersion: v1}}]\n",
        REG,
        "profiles[0].pluginConfig[0].args.apiVersion",
        'got "v1"',
    ),
    (
        "args-unknown-field",
        HEADER
        + "profiles:\n- pluginConfig:\n  - name: PrioritySort\n  - name: NodeResourcesFit\n"
        + "    args: {scoringStrategy: {bogus: 1}}\n",
        REG,
        "profiles[0].pluginConfig[1].args (NodeResourcesFitArgs)",
        "Object contains unknown field `bogus` - at `$.scoringStrategy`",
    ),
    (
        "args-validate",
        HEADER
        + "profiles:\n- pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: Random}}}]\n",
        REG,
        "profiles[0].pluginConfig[0].args (NodeResourcesFitArgs)",
        'scoringStrategy.type: unsupported "Random"',
    ),
    (
        "args-for-argless-plugin",
        HEADER + "profiles:\n- pluginConfig: [{name: PrioritySort, args: {kind: PrioritySortArgs, x: 1}}]\n",
        REG,
        "profiles[0].pluginConfig[0].args",
        'plugin "PrioritySort" takes no args, got field `x`',
    ),
    (
        "default-args-invalid",
        HEADER + PROFILE_PLUGINS + "    filter: {enabled: [{name: Broken}]}\n",
        Registry([*BASE_SPECS, plugin("Broken", "filter", args_type=BrokenArgs)]),
        "profiles[0].pluginConfig",
        "default BrokenArgs are invalid: always wrong",
    ),
]


@pytest.mark.parametrize(
    ("document", "registry", "where", "fragment"),
    [pytest.param(doc, reg, where, frag, id=case_id) for case_id, doc, reg, where, frag in ERROR_CASES],
)
def test_errors_name_the_field(document: str, registry: Registry, where: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(document.encode(), registry)
    err = info.value
    assert err.where == where
    assert fragment in err.detail
    assert str(err) == f"{where}: {err.detail}"
    assert err.source is None


def test_not_utf8() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(b"\xff\xfe\x00bad", REG)
    assert info.value.where == "document"
    assert "not UTF-8" in info.value.detail


def test_errors_from_a_file_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(HEADER + "podMaxBackoffSeconds: 0\n")
    with pytest.raises(ConfigError) as info:
        load_config(str(path), REG)
    assert str(info.value) == f"{path}: podMaxBackoffSeconds: must be >= podInitialBackoffSeconds (1), got 0"
    assert info.value.source == str(path)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(path, REG)
    assert str(info.value).startswith(f"{path}: cannot read the config")


def test_default_config_needs_a_queue_sort_plugin() -> None:
    with pytest.raises(ConfigError) as info:
        default_config(Registry([plugin("DefaultBinder", "bind")]))
    assert info.value.where == "profiles[0].plugins.queueSort"
    assert info.value.source is None
