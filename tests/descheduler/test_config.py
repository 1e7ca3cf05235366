"""DeschedulerConfiguration: Koordinator's shipped config, defaults, plugin sets and clear errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from koordsched.config.errors import ConfigError
from koordsched.descheduler.config.default import default_descheduler_config_path
from koordsched.descheduler.config.load import load_descheduler_config
from koordsched.descheduler.migration.args import MigrationControllerArgs
from koordsched.descheduler.plugins.lownodeload.args import LowNodeLoadArgs
from koordsched.descheduler.registry import in_tree_catalog

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "examples" / "profiles" / "koordinator-descheduler.yaml"


def _load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    p = tmp_path / "d.yaml"
    p.write_text(textwrap.dedent(text))
    return load_descheduler_config(p, in_tree_catalog())


HEAD = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"


def test_koordinator_shipped_config_loads_unchanged() -> None:
    cfg = load_descheduler_config(SHIPPED, in_tree_catalog())
    assert cfg.interval == 10.0
    assert cfg.lease_name == "koord-descheduler" and cfg.lease_namespace == "koordinator-system"
    (prof,) = cfg.profiles
    assert prof.name == "koord-descheduler"
    assert prof.plugins == {
        "deschedule": [],
        "balance": [],
        "evict": ["MigrationController"],
        "filter": ["MigrationController"],
    }
    mc = prof.args["MigrationController"]
    assert isinstance(mc, MigrationControllerArgs)
    assert mc.qps == 10.0 and mc.evict_burst == 1 and mc.eviction_policy == "Eviction"
    assert mc.namespaces is not None and mc.namespaces.exclude == ["kube-system", "koordinator-system"]
    assert mc.max_migrating_per_node == 2 and mc.default_job_mode == "ReservationFirst"
    lnl = prof.args["LowNodeLoad"]
    assert isinstance(lnl, LowNodeLoadArgs)
    assert lnl.low_thresholds == {"cpu": 45, "memory": 55} and lnl.high_thresholds == {
        "cpu": 75,
        "memory": 80,
    }
    assert lnl.node_fit and lnl.anomaly() == (60.0, 5, 3)


def test_bundled_config_is_the_shipped_one_with_lownodeload_enabled() -> None:
    bundled = load_descheduler_config(default_descheduler_config_path(), in_tree_catalog())
    shipped = load_descheduler_config(SHIPPED, in_tree_catalog())
    assert bundled.profiles[0].plugins["balance"] == ["LowNodeLoad"]
    assert bundled.profiles[0].args == shipped.profiles[0].args
    copy = ROOT / "config" / "koord-descheduler.yaml"
    assert copy.read_text() == default_descheduler_config_path().read_text()


def test_defaults_without_a_file() -> None:
    cfg = load_descheduler_config(None, in_tree_catalog())
    (prof,) = cfg.profiles
    assert prof.name == "koord-descheduler" and cfg.interval == 0
    assert prof.plugins["evict"] == ["MigrationController"] and prof.plugins["balance"] == []
    assert isinstance(prof.args["MigrationController"], MigrationControllerArgs)


@pytest.mark.parametrize(
    ("text", "where", "detail"),
    [
        ("apiVersion: descheduler/v1alpha1\nkind: DeschedulerConfiguration\n", "apiVersion", "must be"),
        (
            "apiVersion: descheduler/v1alpha2\nkind: KubeSchedulerConfiguration\n",
            "kind",
            "DeschedulerConfiguration",
        ),
        (HEAD + "deschedulingInterval: 10 seconds\n", "deschedulingInterval", "invalid duration"),
        (HEAD + "deschedulingInterval: -1s\n", "deschedulingInterval", "must be 0 or positive"),
        (HEAD + "profilez: []\n", "DeschedulerConfiguration", "unknown field `profilez`"),
        (
            HEAD
            + "profiles:\n- name: a\n  plugins:\n    balance:\n      enabled:\n      - name: LowNodeLoadd\n",
            "profiles[0].plugins.balance.enabled[0].name",
            'unknown descheduler plugin "LowNodeLoadd"',
        ),
        (
            HEAD + "profiles:\n- name: a\n  plugins:\n    balance:\n      enabled:\n"
            "      - name: MigrationController\n",
            "profiles[0].plugins.balance.enabled[0].name",
            "does not implement extension point balance",
        ),
        (
            HEAD
            + "profiles:\n- name: a\n  plugins:\n    balance:\n      enabled:\n      - name: LowNodeLoad\n"
            "    evict:\n      disabled:\n      - name: '*'\n",
            "profiles[0].plugins.evict",
            "exactly one Evict plugin",
        ),
        (HEAD + "profiles:\n- name: a\n- name: a\n", "profiles[1].name", 'Duplicate value: "a"'),
        (HEAD + "profiles:\n- name: a\n- {}\n", "profiles[1].name", "Required value"),
        (
            HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: LowNodeLoad\n    args:\n"
            "      lowThresholds: {cpu: 80}\n      highThresholds: {cpu: 70}\n",
            "profiles[0].pluginConfig[0].args (LowNodeLoadArgs)",
            "LowNodeLoadArgs.lowThresholds[cpu]: Invalid value: 80: "
            "low percentage must be less than or equal to "
            "highThresholds",
        ),
        (
            HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: LowNodeLoad\n    args:\n"
            "      highThresholds: {cpu: -1}\n",
            "profiles[0].pluginConfig[0].args (LowNodeLoadArgs)",
            "highThresholds[cpu]: Invalid value: -1: percentage must be greater than or equal to 0",
        ),
        # Issue 24, item 2: YAML's non-finite floats are refused with the field's path.
        *(
            (
                HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: LowNodeLoad\n    args:\n"
                f"      {field}: {{cpu: {value}}}\n",
                "profiles[0].pluginConfig[0].args (LowNodeLoadArgs)",
                f"LowNodeLoadArgs.{field}[cpu]: Invalid value: {shown}: {detail}",
            )
            for field in ("lowThresholds", "highThresholds", "prodLowThresholds", "prodHighThresholds")
            for value, shown, detail in (
                (".nan", "NaN", "percentage must be a number between 0 and 100"),
                (".inf", "+Inf", "percentage must be less than or equal to 100"),
                ("-.inf", "-Inf", "percentage must be greater than or equal to 0"),
            )
        ),
        (
            HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: LowNodeLoad\n    args:\n"
            "      nodePools: [{name: p, lowThresholds: {memory: .NaN}}]\n",
            "profiles[0].pluginConfig[0].args (LowNodeLoadArgs)",
            "LowNodeLoadArgs.nodePools[0].lowThresholds[memory]: Invalid value: NaN",
        ),
        (
            HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: LowNodeLoad\n    args:\n"
            "      anomalyCondition: {consecutiveAbnormalities: 4294967296}\n",
            "profiles[0].pluginConfig[0].args (LowNodeLoadArgs)",
            "anomalyCondition.consecutiveAbnormalities: Invalid value: 4294967296: "
            "must be less than or equal to 4294967295",
        ),
        (
            HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: LowNodeLoad\n    args:\n"
            "      evictableNamespaces: {include: [a], exclude: [b]}\n",
            "profiles[0].pluginConfig[0].args (LowNodeLoadArgs)",
            "only one of Include/Exclude namespaces can be set",
        ),
        (
            HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: LowNodeLoad\n    args:\n"
            "      highThresholds: {cpu: 70}\n      nodePools: [{name: p, highThresholds: {cpu: 50}}]\n",
            "profiles[0].pluginConfig[0].args (LowNodeLoadArgs)",
            "set the thresholds in each node pool",
        ),
        (
            HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: LowNodeLoad\n    args:\n"
            "      kind: LowNodeLoadArgz\n",
            "profiles[0].pluginConfig[0].args.kind",
            'must be "LowNodeLoadArgs"',
        ),
        (
            HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: LowNodeLoad\n    args:\n"
            "      apiVersion: kubescheduler.config.k8s.io/v1\n",
            "profiles[0].pluginConfig[0].args.apiVersion",
            'must be "descheduler/v1alpha2", got "kubescheduler.config.k8s.io/v1"',
        ),
        (
            HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      defaultJobMode: Whatever\n",
            "profiles[0].pluginConfig[0].args (MigrationControllerArgs)",
            'MigrationControllerArgs.defaultJobMode: Unsupported value: "Whatever"',
        ),
        (
            HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      evictQPS: fast\n",
            "profiles[0].pluginConfig[0].args (MigrationControllerArgs)",
            'evictQPS: Invalid value: "fast": must be a number',
        ),
        (
            HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      maxMigratingPerWorkload: 10 percent\n",
            "profiles[0].pluginConfig[0].args (MigrationControllerArgs)",
            "maxMigratingPerWorkload",
        ),
        (
            HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: RemovePodsViolatingNodeAffinity\n",
            "profiles[0].pluginConfig[0].name",
            'unknown descheduler plugin "RemovePodsViolatingNodeAffinity"',
        ),
        (HEAD + "maxNoOfPodsToEvictPerNode: -1\n", "maxNoOfPodsToEvictPerNode", "greater than or equal to 0"),
        (
            HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      evictionPolicy: SoftEviction\n",
            "profiles[0].pluginConfig[0].args (MigrationControllerArgs)",
            'evictionPolicy: Invalid value: "SoftEviction": not supported by koordsched',
        ),
    ],
)
def test_refused_with_the_field_named(tmp_path: Path, text: str, where: str, detail: str) -> None:
    with pytest.raises(ConfigError) as exc:
        _load(tmp_path, text)
    assert exc.value.where == where, str(exc.value)
    assert detail in exc.value.detail, str(exc.value)
    assert str(tmp_path / "d.yaml") in str(exc.value)


def test_disabled_star_drops_defaults_and_enabled_appends(tmp_path: Path) -> None:
    cfg = _load(
        tmp_path,
        HEAD
        + textwrap.dedent(
            """\
        profiles:
        - name: p
          plugins:
            filter:
              disabled: [{name: "*"}]
            balance:
              enabled: [{name: LowNodeLoad}]
          pluginConfig:
          - name: LowNodeLoad
            args:
              dryRun: true
              nodePools:
              - name: gpu
                nodeSelector: {matchLabels: {pool: gpu}}
                highThresholds: {cpu: 60}
                lowThresholds: {cpu: 20}
                anomalyCondition: {consecutiveAbnormalities: 2}
        """
        ),
    )
    prof = cfg.profiles[0]
    assert prof.plugins["filter"] == [] and prof.plugins["balance"] == ["LowNodeLoad"]
    args = prof.args["LowNodeLoad"]
    assert isinstance(args, LowNodeLoadArgs) and args.dry_run
    (pool,) = args.pools()
    assert pool.name == "gpu" and pool.high == {"cpu": 60} and pool.anomaly == (60.0, 2, 0)
    assert pool.weights == {"cpu": 1, "memory": 1}


def test_resource_weights_default_and_non_positive_become_one() -> None:
    args = LowNodeLoadArgs(
        high_thresholds={"cpu": 70, "nvidia.com/gpu": 80}, resource_weights={"cpu": 0, "memory": 3}
    )
    assert args.weights() == {"cpu": 1, "memory": 3, "nvidia.com/gpu": 1}


def test_default_job_ttl_is_spelled_as_koordinator_spells_it(tmp_path: Path) -> None:
    text = HEAD + "profiles:\n- name: a\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
    (prof,) = _load(tmp_path, text + "      defaultJobTTL: 90s\n").profiles
    args = prof.args["MigrationController"]
    assert isinstance(args, MigrationControllerArgs)
    assert (args.default_job_ttl, args.ttl) == ("90s", 90.0)
    with pytest.raises(ConfigError) as exc:  # camel-casing's spelling is not Koordinator's
        _load(tmp_path, text + "      defaultJobTtl: 90s\n")
    assert "unknown field `defaultJobTtl`" in exc.value.detail, str(exc.value)
