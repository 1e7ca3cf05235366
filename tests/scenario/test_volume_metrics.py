"""kube-scheduler's volume binding counters after a ``simulate`` run with claims.

The simulator's PV controller and provisioner always answer, so no stage fails here: pods that
find no PV are unschedulable (a reason, which upstream does not count as an error), and the
stage error family is exported with upstream's name and type (the binder cache counter is not:
kube-scheduler 1.28 registers it without ever counting, so its /metrics has no such family).
The error paths are table-tested on the plugin
(tests/plugins/volumes/test_volumebinding_metrics.py).
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from koordsched.backends.sim.loader import kind_specs, load_cluster
from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, simulate_cluster
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.observability.metrics import SchedulerMetrics
from koordsched.plugins.registry import in_tree_registry
from tests.scenario.helpers import WriteYaml
from tests.scenario.test_volumes import claim, cluster, local_pv, node, pod, storage_class


async def test_a_run_with_claims_counts_no_stage_errors_and_exports_the_family(
    write_yaml: WriteYaml,
) -> None:
    path = write_yaml(
        cluster(
            node("n1"),
            node("n2"),
            storage_class("local"),
            storage_class("csi", provisioner="csi.example.com"),
            local_pv("n1-a", "n1"),
            *(claim(f"data-{i}") for i in range(2)),
            claim("dyn", cls="csi"),
            pod("db-0", "data-0"),
            pod("db-1", "data-1"),
            pod("app", "dyn"),
        )
    )
    registry = in_tree_registry()
    config = load_config(default_profile_path().read_bytes(), registry)
    metrics = SchedulerMetrics()
    result = await simulate_cluster(
        load_cluster([path], kind_specs(registry)), config, registry, metrics=metrics
    )
    statuses = {p.key: p.status for p in result.pods}
    assert statuses["default/app"] == SCHEDULED
    assert sorted(statuses[f"default/db-{i}"] for i in range(2)) == sorted([SCHEDULED, UNSCHEDULABLE])
    assert sum(v.status == "Bound" for v in result.volumes) == 2

    families = {f.name: f for f in text_string_to_metric_families(metrics.exposition().decode())}
    errors = families["scheduler_volume_scheduling_stage_error"]
    assert "scheduler_volume_binder_cache_requests" not in families
    assert (errors.type, errors.documentation) == ("counter", "[ALPHA] Volume scheduling stage error count")
    assert errors.samples == []
    # The run did go through VolumeBinding's Filter and PreBind (the framework timed them).
    get = metrics.registry.get_sample_value
    assert (
        get(
            "scheduler_framework_extension_point_duration_seconds_count",
            {"extension_point": "PreBind", "status": "Success", "profile": "koord-scheduler"},
        )
        or 0
    ) >= 2
