"""The binding side of the simulator: failed binds roll back and retry, Permit waits, binding plans."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from koordsched.backends.sim.port import fail_first_binds
from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, simulate, simulate_async
from tests.builders import pod_manifest, yaml_doc
from tests.scenario import fakes
from tests.scenario.helpers import WriteYaml, assert_failed_scheduling

CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: only}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: spare}
status: {allocatable: {cpu: "1", memory: 4Gi, pods: "10"}}
"""


def _pod(name: str, cpu: str = "2", labels: str = "{}") -> str:
    """A pod document; ``labels`` is a YAML flow mapping."""
    return yaml_doc(pod_manifest(name, cpu, None, uid="", labels=yaml.safe_load(labels)))


def test_failed_bind_is_rolled_back_and_retried(write_yaml: WriteYaml) -> None:
    path = write_yaml(CLUSTER + _pod("web"))
    result = simulate([path], bind_hook=fail_first_binds(["default/web"], "etcd timeout"))
    web = result.pod("default/web")
    # The only node with room is "only": had the failed bind kept its reservation, the retry
    # would not fit there.
    assert (web.status, web.node, web.attempts) == (SCHEDULED, "only", 2)
    assert result.port.bind_failures == 1
    events = [(e.reason, e.message) for e in result.port.events_for("default/web")]
    assert events == [
        (
            "FailedScheduling",
            'running Bind plugin "DefaultBinder": etcd timeout: pod default/web on node only',
        ),
        ("Scheduled", "Successfully assigned default/web to only"),
    ]
    only = next(n for n in result.nodes if n.name == "only")
    assert (only.pods, only.resources["cpu"]) == (1, (2000, 2000))
    assert result.port.conditions["default/web"].status == "True"


def test_capacity_freed_by_a_failed_bind_goes_to_the_next_pod(write_yaml: WriteYaml) -> None:
    path = write_yaml(CLUSTER + _pod("first") + _pod("second"))
    result = simulate([path], bind_hook=fail_first_binds(["default/first"]))
    assert result.pod("default/second").node == "only"
    first = result.pod("default/first")
    assert first.status == UNSCHEDULABLE
    assert_failed_scheduling(first.message, "0/2 nodes are available: 2 Insufficient cpu.")


def test_bound_pod_carries_the_binding_plans_annotations(write_yaml: WriteYaml, tmp_path: Path) -> None:
    path = write_yaml(CLUSTER + _pod("web"))
    result = simulate([path], config_path=fakes.write_profile(tmp_path), registry=fakes.registry())
    web = result.pod("default/web")
    assert web.annotations == {fakes.ANNOTATION: "only"}
    assert result.port.pods["default/web"].metadata.annotations == {fakes.ANNOTATION: "only"}
    assert result.port.pods["default/web"].spec.node_name == "only"


async def test_pod_held_at_permit_times_out_on_virtual_time_and_no_task_is_left(
    write_yaml: WriteYaml, tmp_path: Path
) -> None:
    labels = f'{{"{fakes.GANG_LABEL}": "0"}}'
    path = write_yaml(CLUSTER + _pod("held", labels=labels) + _pod("free", cpu="1"))
    before = asyncio.all_tasks()
    result = await simulate_async(
        [path], config_path=fakes.write_profile(tmp_path), registry=fakes.registry()
    )
    held = result.pod("default/held")
    # The run moved virtual time to the Permit deadline (600 s) instead of sleeping or stopping
    # with the pod held; kube-scheduler's words, the timeout printed as a Go duration.
    assert (held.status, held.node) == (UNSCHEDULABLE, None)
    assert held.message == "rejected due to timeout after waiting 10m0s at plugin HoldAtPermit"
    assert result.pod("default/free").status == SCHEDULED
    assert (result.summary.waiting, result.summary.scheduled) == (0, 1)
    assert result.summary.wall_seconds < 60
    assert [t for t in asyncio.all_tasks() - before if not t.done()] == []


async def test_gang_allowed_at_permit_binds_every_member(write_yaml: WriteYaml, tmp_path: Path) -> None:
    labels = f'{{"{fakes.GANG_LABEL}": "3"}}'
    nodes = "".join(
        f"---\n{{kind: Node, metadata: {{name: n{i}}}, status: {{allocatable: {{cpu: '4', pods: '9'}}}}}}\n"
        for i in range(3)
    )
    path = write_yaml(nodes + "".join(_pod(f"worker-{i}", cpu="1", labels=labels) for i in range(3)))
    result = await simulate_async(
        [path], config_path=fakes.write_profile(tmp_path), registry=fakes.registry()
    )
    assert [p.status for p in result.pods] == [SCHEDULED] * 3
    assert all(p.annotations == {fakes.ANNOTATION: p.node} for p in result.pods)
