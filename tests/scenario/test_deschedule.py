"""``koordsched deschedule`` through the path users run: LowNodeLoad picks pods off a hot node,
the MigrationController's limits pace them, the scheduler places each replacement, and the
report shows NodeMetric usage before and after."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from koordsched.backends.sim.deschedule import DescheduleResult, deschedule
from koordsched.cli import main
from tests.scenario.helpers import WriteYaml

ROOT = Path(__file__).resolve().parents[2]
HOT = ROOT / "examples" / "hot-node.yaml"
SHIPPED = ROOT / "examples" / "profiles" / "koordinator-descheduler.yaml"

CONFIG = """
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
deschedulingInterval: 10s
profiles:
- name: koord-descheduler
  plugins:
    balance:
      enabled: [{{name: LowNodeLoad}}]
  pluginConfig:
  - name: MigrationController
    args:
      namespaces: {{exclude: [kube-system]}}
{mc}
  - name: LowNodeLoad
    args:
      evictableNamespaces: {{exclude: [kube-system]}}
      lowThresholds: {{cpu: 45, memory: 55}}
      highThresholds: {{cpu: 75, memory: 80}}
{lnl}
"""


#: No per-workload pacing, so the node and global limits show alone.
UNPACED = (
    "      maxMigratingPerWorkload: 10\n      maxUnavailablePerWorkload: 10\n"
    "      objectLimiters: {workload: {duration: 0s}}"
)


def _config(write_yaml: WriteYaml, mc: str = "", lnl: str = "") -> Path:
    return write_yaml(CONFIG.format(mc=mc, lnl=lnl))


def _by_pod(result: DescheduleResult) -> dict[str, tuple[str | None, str]]:
    return {m.pod: (m.target, m.phase) for m in result.migrations}


def test_hot_node_example_with_the_bundled_config() -> None:
    result = deschedule([HOT])
    assert result.rounds == 6  # more than consecutiveAbnormalities (5) rounds over the threshold
    moved = _by_pod(result)
    # Batch pods go first (koord-batch before koord-prod), then the newest web replica; the
    # second batch pod waits: spark-exec has 2 replicas, so 1 may migrate per 5 minutes.
    assert moved == {
        "default/spark-exec-1": ("node-cool-a", "Succeeded"),
        "default/spark-exec-0": (None, "Pending"),
        "default/web-7d9f-5": ("node-cool-b", "Succeeded"),
    }
    pending = next(m for m in result.migrations if m.phase == "Pending")
    assert "objectLimiters[workload]" in pending.message
    first = result.migrations[0]
    assert first.plugin == "LowNodeLoad" and first.mode == "ReservationFirst"
    assert first.reason == "node is overutilized, node cpu usage(98.00%)>threshold(75.00%)"
    loads = {n.name: n.resources for n in result.nodes}
    # Before: koordlet's 7.84 cores of 8; after: minus spark-exec-1 (0.5) and web-7d9f-5 (0.9).
    assert loads["node-hot"]["cpu"] == (7840, 6440, 8000)
    assert loads["node-cool-a"]["cpu"] == (1200, 1700, 8000)
    assert loads["node-cool-b"]["cpu"] == (1600, 2500, 8000)
    assert loads["node-warm"]["cpu"] == (4800, 4800, 8000)
    # asyncio.run builds the result's repr: counts, never every node's load.
    assert repr(result) == (
        f"DescheduleResult(migrations=3, nodes={len(result.nodes)}, rounds=6, dry_run=False, "
        f"warnings={len(result.warnings)})"
    )


def test_koordinators_shipped_config_moves_nothing() -> None:
    """It loads unchanged and enables no Balance plugin."""
    result = deschedule([HOT], config_path=SHIPPED)
    assert result.migrations == [] and result.rounds == 1


def test_per_node_limit_stops_a_second_eviction(write_yaml: WriteYaml) -> None:
    """With maxMigratingPerNode 1 and no workload pacing, one migration runs at a time per node;
    the next starts only when the first has finished."""
    cfg = _config(
        write_yaml,
        mc="      maxMigratingPerNode: 1\n" + UNPACED,
    )
    result = deschedule([HOT], config_path=cfg)
    assert [m.phase for m in result.migrations] == ["Succeeded"] * 3
    waited = [m.message for m in result.migrations if "waited for" in m.message]
    assert waited and all("maxMigratingPerNode=1 reached on node node-hot" in w for w in waited)


def test_global_limit_zero_means_unlimited_and_one_paces(write_yaml: WriteYaml) -> None:
    cfg = _config(
        write_yaml,
        mc="      maxMigratingGlobally: 1\n" + UNPACED,
    )
    result = deschedule([HOT], config_path=cfg)
    assert len(result.migrations) == 3
    assert sum("maxMigratingGlobally=1 reached" in m.message for m in result.migrations) == 2


def test_evict_directly_places_replacements_after_the_eviction(write_yaml: WriteYaml) -> None:
    cfg = _config(write_yaml, mc="      defaultJobMode: EvictDirectly")
    result = deschedule([HOT], config_path=cfg)
    done = [m for m in result.migrations if m.phase == "Succeeded"]
    assert done and all(
        m.mode == "EvictDirectly" and m.target in ("node-cool-a", "node-cool-b") for m in done
    )


def test_dry_run_moves_nothing_but_says_what_it_would(write_yaml: WriteYaml) -> None:
    cfg = _config(write_yaml, lnl="      dryRun: true")
    result = deschedule([HOT], config_path=cfg)
    assert result.migrations == []
    assert [d[2] for d in result.dry_run_decisions] == [
        "default/spark-exec-1",
        "default/spark-exec-0",
        "default/web-7d9f-5",
    ]
    assert all(n.resources["cpu"][0] == n.resources["cpu"][1] for n in result.nodes)


def test_no_pod_is_moved_where_the_scheduler_would_refuse_it(write_yaml: WriteYaml) -> None:
    """Cordon both cool nodes: the scheduler's filters accept no destination, so nothing moves
    (node-warm is not under the low thresholds)."""
    text = HOT.read_text().replace(
        "  name: node-cool-a\n  labels: {kubernetes.io/hostname: node-cool-a}\n",
        "  name: node-cool-a\n  labels: {kubernetes.io/hostname: node-cool-a}\nspec: {unschedulable: true}\n",
    )
    text = text.replace(
        "  name: node-cool-b\n  labels: {kubernetes.io/hostname: node-cool-b}\n",
        "  name: node-cool-b\n  labels: {kubernetes.io/hostname: node-cool-b}\n"
        "spec:\n  taints: [{key: maintenance, effect: NoSchedule}]\n",
    )
    path = write_yaml(text)
    result = deschedule([path])
    assert result.migrations == []


def test_cli_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deschedule", str(HOT)]) == 0
    out = capsys.readouterr().out
    assert "default/spark-exec-1  node-hot  node-cool-a  Succeeded  spark-exec-1-" in out
    assert "RESERVATION" in out and "(Succeeded on node-cool-a)" in out
    assert "node is overutilized, node cpu usage(98.00%)>threshold(75.00%)" in out
    assert "node-hot     98%               80%    62%                  53%" in out
    assert main(["deschedule", str(HOT), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rounds"] == 6
    first = doc["migrations"][0]
    assert first["pod"] == "default/spark-exec-1"
    reservation = first["reservation"]
    assert reservation["name"] == first["job"] and reservation["phase"] == "Succeeded"
    assert reservation["node"] == first["to"] == "node-cool-a"
    assert reservation["owner"].startswith("default/spark-exec-1-")
    assert first["message"] == f'Bind Pod "{reservation["owner"]}" in Reservation "{reservation["name"]}"'
    assert next(m for m in doc["migrations"] if m["phase"] == "Pending")["reservation"] is None
    hot = next(n for n in doc["nodes"] if n["name"] == "node-hot")
    assert hot["cpu"] == {"before": 7840, "after": 6440, "allocatable": 8000}


def test_cli_refuses_a_bad_config(write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write_yaml(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"
        "profiles: [{name: a, plugins: {balance: {enabled: [{name: Nope}]}}}]\n"
    )
    assert main(["deschedule", str(HOT), "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert 'profiles[0].plugins.balance.enabled[0].name: unknown descheduler plugin "Nope"' in err


def test_cli_needs_manifests_or_a_kubeconfig(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deschedule"]) == 2
    assert "give manifests to simulate, or --kubeconfig" in capsys.readouterr().err
    assert main(["deschedule", str(HOT), "--kubeconfig", "/nonexistent"]) == 2
    assert "not both" in capsys.readouterr().err


def test_max_pods_to_evict_per_node_per_round(write_yaml: WriteYaml) -> None:
    text = CONFIG.format(mc="", lnl="").replace(
        "deschedulingInterval: 10s\n", "deschedulingInterval: 10s\nmaxNoOfPodsToEvictPerNode: 1\n"
    )
    result = deschedule([HOT], config_path=write_yaml(text))
    assert [m.pod for m in result.migrations] == ["default/spark-exec-1"]
    total = CONFIG.format(mc="", lnl="").replace(
        "deschedulingInterval: 10s\n", "deschedulingInterval: 10s\nmaxNoOfPodsToEvictTotal: 2\n"
    )
    assert len(deschedule([HOT], config_path=write_yaml(total, name="t.yaml")).migrations) == 2


def test_reservation_first_never_reserves_on_the_node_it_leaves(
    write_yaml: WriteYaml, tmp_path: Path
) -> None:
    """Only the hot node has room (the others take no pod, LowNodeLoad's nodeFit off, LoadAware's
    filter relaxed): the Reservation (here its stand-in) may not go back there, as Koordinator's
    ``metadata.name NotIn [node]``, so no pod moves and nothing lands on node-hot."""
    import yaml

    # node-hot with room for one more pod (its usage stays over 75 %).
    text = HOT.read_text().replace(
        'allocatable: {cpu: "8", memory: 32Gi, pods: "110"}',
        'allocatable: {cpu: "10", memory: 32Gi, pods: "110"}',
        1,
    )
    for name in ("node-warm", "node-cool-a", "node-cool-b"):  # no pod fits (their pods: 0)
        head = f"  name: {name}\n  labels: {{kubernetes.io/hostname: {name}}}\nstatus:\n"
        old = head + '  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}\n'
        assert old in text, name
        text = text.replace(old, head + '  allocatable: {cpu: "8", memory: 32Gi, pods: "0"}\n')
    profile = yaml.safe_load((ROOT / "config" / "koord-scheduler.yaml").read_text())
    for prof in profile["profiles"]:
        for pc in prof.get("pluginConfig", []):
            if pc["name"] == "LoadAwareScheduling":
                pc["args"]["usageThresholds"] = {"cpu": 100, "memory": 100}
    sched = tmp_path / "sched.yaml"
    sched.write_text(yaml.safe_dump(profile, sort_keys=False))
    cfg = _config(write_yaml, mc=UNPACED, lnl="      nodeFit: false")
    cluster = tmp_path / "hot-only.yaml"
    cluster.write_text(text)
    result = deschedule([cluster], config_path=cfg, scheduler_config_path=sched)
    assert result.migrations, "LowNodeLoad asked for no migration"
    assert all(m.target is None and m.phase != "Succeeded" for m in result.migrations), result.migrations
    # The Reservation stayed Pending (the scheduler's reason synced to it) until the job's TTL
    # ended the job; Koordinator then deletes it. The pod was never evicted.
    for m in result.migrations:
        assert (m.phase, m.message) == ("Failed", "Abort job caused by timeout"), m
        r = m.reservation
        assert r is not None and (r.phase, r.node) == ("Deleted", None), r
        assert "didn't match Pod's node affinity/selector" in r.message, r
    assert result.nodes[0].resources["cpu"][0] == result.nodes[0].resources["cpu"][1]


def test_reservation_first_through_a_real_reservation() -> None:
    """Each ReservationFirst job creates a Reservation (named after the job) that the scheduler
    places on a cool node while the pod still runs; the pod is evicted, and its controller's new
    pod allocates the Reservation (allocateOnce: Succeeded, the new pod its owner), as in a cluster."""
    result = deschedule([HOT])
    done = [m for m in result.migrations if m.phase == "Succeeded"]
    assert len(done) == 2
    for m in done:
        r = m.reservation
        assert r is not None and r.name == m.job
        assert (r.phase, r.node) == ("Succeeded", m.target)
        base = m.pod.rsplit("-", 1)[0]  # the ReplicaSet's pods share its generateName
        assert r.owner is not None and r.owner != m.pod and r.owner.startswith(base + "-")
        assert m.message == f'Bind Pod "{r.owner}" in Reservation "{r.name}"'


@pytest.mark.parametrize(
    ("abnormalities", "rounds"),
    [(1, 2), (5, 6), (1_000_000, 1_000_001), (4_294_967_295, 4_294_967_296)],
)
def test_any_uint32_consecutive_abnormalities_is_counted_not_played(
    write_yaml: WriteYaml, abnormalities: int, rounds: int
) -> None:
    """Issue 24, item 3: the rounds before the detector turns Anomaly change nothing but its
    streak; they are counted, so a legal uint32 ends as soon as 5 does, with the same moves."""
    baseline = deschedule([HOT], config_path=_config(write_yaml))
    anomaly = f"      anomalyCondition: {{consecutiveAbnormalities: {abnormalities}}}"
    result = deschedule([HOT], config_path=_config(write_yaml, lnl=anomaly))
    assert result.rounds == rounds
    assert _by_pod(result) == _by_pod(baseline) != {}


def test_no_node_over_its_thresholds_ends_after_one_round_played(write_yaml: WriteYaml) -> None:
    cfg = write_yaml(
        CONFIG.format(mc="", lnl="      anomalyCondition: {consecutiveAbnormalities: 4294967295}").replace(
            "highThresholds: {cpu: 75, memory: 80}", "highThresholds: {cpu: 100, memory: 100}"
        )
    )
    result = deschedule([HOT], config_path=cfg)
    assert result.migrations == [] and result.rounds == 4_294_967_296
