"""LoadAwareScheduling on a real apiserver: NodeMetric objects steer pods away from busy nodes.

The NodeMetric CRD of ``deploy/crds/`` is installed; each node gets a NodeMetric whose status is
written through the status subresource, as koordlet writes it, with ``updateTime`` = now. The
scheduler runs with :data:`PROFILE` (the Helm chart's LoadAwareScheduling args, spec 5.1), not
the default profile, so the test does not depend on what the default enables.

1. A pod goes to the cool node, without a single FailedScheduling, although the hot node is
   bigger (NodeResourcesFit alone would prefer it): the hot node's usage is above 65% cpu.
2. Every node hot: the next pod stays Pending with PodScheduled=False, reason Unschedulable, and
   the threshold message, also as a FailedScheduling event.
3. koordlet reports the hot node cool again (a status update): the NodeMetric Update event
   requeues the pod, which binds there, well before the 5-minute unschedulable flush.

Expected usages, by hand from spec 4.6 (estimate = request x 85% for cpu; usage% =
round(estimated / allocatable x 100), refused when above 65):
  hot  16 cores, 12 used:  (12000 + 850) / 16000 = 80%   refused
  cool  8 cores,  1 used:  ( 1000 + 850) /  8000 = 23%   fits
  cool  8 cores,  7 used:  ( 7000 + 850 + 850 for the first pod) / 8000 = 109%   refused
  hot  16 cores,  2 used:  ( 2000 + 850) / 16000 = 18%   fits

Like ``test_devices.py``, this module runs its own control plane, so that the CRD stays out of
the shared one of the other tests.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordsched.backends.kube.timefmt import rfc3339
from tests.e2e.conftest import SCHEDULER_USER
from tests.e2e.fixtures import control_plane, own_lease
from tests.e2e.helpers import (
    Api,
    ApiError,
    Cluster,
    InProcessScheduler,
    condition_message,
    events_for,
    metric,
    node_of,
    scheduler_in_process,
    wait_for,
    write_profile,
)
from tests.e2e.test_crd_smoke import COLLECTIONS, install_crds

pytestmark = pytest.mark.e2e

NODE_METRICS = COLLECTIONS["NodeMetric"]

#: The chart's LoadAwareScheduling args at filter, score and reserve, on kube-scheduler's defaults.
PROFILE = """
- schedulerName: koord-scheduler
  pluginConfig:
    - name: LoadAwareScheduling
      args:
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: LoadAwareSchedulingArgs
        filterExpiredNodeMetrics: false
        nodeMetricExpirationSeconds: 300
        resourceWeights: {cpu: 1, memory: 1}
        usageThresholds: {cpu: 65, memory: 95}
        estimatedScalingFactors: {cpu: 85, memory: 70}
  plugins:
    filter: {enabled: [{name: LoadAwareScheduling}]}
    score: {enabled: [{name: LoadAwareScheduling, weight: 1}]}
    reserve: {enabled: [{name: LoadAwareScheduling}]}
"""

#: With DefaultPreemption's part: the threshold is resolvable, but no pod has a lower priority.
THRESHOLD_MESSAGE = (
    "0/2 nodes are available: 2 node(s) cpu usage exceed threshold. "
    "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.."
)


kube_env = control_plane({SCHEDULER_USER: ["system:masters"]})


def loadaware_profile(path: Path, lease: str) -> Path:
    """This test's leader election settings with :data:`PROFILE` as the only profile."""
    cfg = yaml.safe_load(write_profile(path, lease_name=lease).read_text())
    cfg["profiles"] = yaml.safe_load(PROFILE)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


async def report(api: Api, node: str, cpu: str, memory: str) -> None:
    """koordlet's report: the status subresource, with updateTime = now."""
    status = {
        "updateTime": rfc3339(),
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": memory}}},
    }
    written = await api.patch(f"{NODE_METRICS}/{node}/status", {"status": status})
    assert written["status"]["nodeMetric"] == status["nodeMetric"], written


async def create_node_metric(api: Api, node: str, cpu: str, memory: str) -> None:
    obj = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": node, "labels": {"koordsched.io/e2e": "true"}},
        "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 300, "reportIntervalSeconds": 60}},
        # Dropped by the server on create (status subresource): written by report() below.
        "status": {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "999"}}}},
    }
    created = await api.post(NODE_METRICS, obj)
    assert "status" not in created or not created["status"], created
    await report(api, node, cpu, memory)


async def node_metric_updates(sched: InProcessScheduler) -> float:
    samples = await sched.metrics()
    return metric(samples or {}, "scheduler_event_handling_duration_seconds_count", event="NodeMetricUpdate")


async def test_pods_avoid_hot_nodes_and_wait_for_a_cool_one(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    await install_crds(api)
    lease = await own_lease(api, cluster)
    profile = loadaware_profile(tmp_path / "profile.yaml", lease)

    cool = await cluster.add_node("cool", cpu="8", memory="32Gi")
    hot = await cluster.add_node("hot", cpu="16", memory="64Gi")
    try:
        await create_node_metric(api, cool, cpu="1", memory="4Gi")
        await create_node_metric(api, hot, cpu="12", memory="8Gi")

        async with scheduler_in_process(profile, scheduler_kubeconfig) as sched:
            # 1. The cool node, at the first attempt.
            first = await cluster.add_pod("first", cpu="1", memory="1Gi")
            bound = (await cluster.wait_bound(["first"]))["first"]
            assert node_of(bound) == cool, (node_of(bound), bound["status"])

            async def scheduled_event() -> list[dict[str, Any]]:
                return events_for(await cluster.events(), first, "Scheduled")

            await wait_for(scheduled_event, what="the Scheduled event of first")
            assert events_for(await cluster.events(), first, "FailedScheduling") == []

            # 2. Every node hot: cool now reports 7 of 8 cores in use.
            before = await node_metric_updates(sched)
            await report(api, cool, cpu="7", memory="4Gi")

            async def seen() -> bool:
                return await node_metric_updates(sched) > before

            await wait_for(seen, what="the scheduler to see the NodeMetric update", detail=sched.log_text)
            second = await cluster.add_pod("second", cpu="1", memory="1Gi")
            pending = await cluster.wait_condition("second", "False", "Unschedulable")
            assert node_of(pending) is None
            assert condition_message(pending) == THRESHOLD_MESSAGE

            async def failed_event() -> list[dict[str, Any]]:
                return events_for(await cluster.events(), second, "FailedScheduling")

            (event, *_) = await wait_for(failed_event, what="the FailedScheduling event of second")
            assert event["note"] == THRESHOLD_MESSAGE, event

            # 3. hot cools down: its NodeMetric update requeues second, which binds there.
            await report(api, hot, cpu="2", memory="8Gi")
            bound = (await cluster.wait_bound(["second"]))["second"]
            assert node_of(bound) == hot, (node_of(bound), bound["status"])

            sched.assert_running()
            assert sched.problems() == [], sched.log_text()
    finally:
        for name in (cool, hot):
            with contextlib.suppress(ApiError):
                await api.delete(f"{NODE_METRICS}/{name}")
