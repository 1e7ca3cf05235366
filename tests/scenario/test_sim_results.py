"""The simulator's results and events for bound pods are read from the bound pods (issue 16):
what a person or a program sees is what one record per pod said, and a run keeps no object per
bound pod for them.

The memory test counts with tracemalloc what a run's result holds (the scheduler's state with
it): each pod more may cost at most :data:`BYTES_PER_POD`.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import msgspec
import pytest
import yaml

from koordsched.api.core import Pod
from koordsched.backends.sim.events import EventLog, SimEvent
from koordsched.backends.sim.loader import LoadedObject, kind_specs, load_cluster
from koordsched.backends.sim.port import fail_first_binds
from koordsched.backends.sim.results import PodResult, PodResults
from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, simulate, simulate_async
from koordsched.framework.types import PodInfo
from koordsched.plugins.registry import in_tree_registry
from tests.builders import pod_manifest, yaml_doc
from tests.scenario import fakes
from tests.scenario.helpers import WriteYaml

NODE = """
---
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}
status: {{allocatable: {{cpu: "{cpu}", memory: 64Gi, pods: "110"}}}}
"""


def _pod(name: str, cpu: str = "1", labels: str = "{}") -> str:
    """A pod document in namespace shop; ``labels`` is a YAML flow mapping."""
    return yaml_doc(pod_manifest(name, cpu, None, namespace="shop", uid="", labels=yaml.safe_load(labels)))


def test_bound_results_read_from_bind_records(write_yaml: WriteYaml) -> None:
    nodes = NODE.format(name="a", cpu="2") + NODE.format(name="b", cpu="2")
    pods = _pod("p0") + _pod("p1") + _pod("big", cpu="3") + _pod("p2") + _pod("p3")
    result = simulate([write_yaml(nodes + pods)], bind_hook=fail_first_binds(["shop/p1"], "etcd timeout"))
    got = [(p.key, p.status, p.node, p.message, p.annotations, p.attempts) for p in result.pods]
    assert [g[:2] for g in got] == [
        ("shop/p0", SCHEDULED),
        ("shop/p1", SCHEDULED),
        ("shop/big", UNSCHEDULABLE),
        ("shop/p2", SCHEDULED),
        ("shop/p3", SCHEDULED),
    ]
    assert sorted(p.node or "" for p in result.pods if p.status == SCHEDULED) == ["a", "a", "b", "b"]
    by_key = {g[0]: g for g in got}
    assert by_key["shop/p1"][3:] == ("", {}, 2)  # retried after its failed bind
    assert by_key["shop/p0"][3:] == ("", {}, 1)
    assert by_key["shop/big"][3].startswith("0/2 nodes are available: 2 Insufficient cpu.")
    # The sequence answers as a list would.
    pods = result.pods
    assert isinstance(pods, PodResults) and len(pods) == 5
    assert list(pods) == [pods[i] for i in range(5)] == pods[:] == [*pods[:2], *pods[2:]]
    assert pods[-1] == pods[4] and pods[1:4:2] == [pods[1], pods[3]]
    assert pods.index(pods[2]) == 2 and pods[0] in pods
    with pytest.raises(IndexError):
        pods[5]
    assert result.pod("shop/p2") == pods[3] and isinstance(pods[3], PodResult)


async def test_bound_results_carry_their_annotations(write_yaml: WriteYaml, tmp_path: Path) -> None:
    labels = f'{{"{fakes.GANG_LABEL}": "2"}}'
    nodes = NODE.format(name="n0", cpu="1") + NODE.format(name="n1", cpu="1")
    path = write_yaml(nodes + _pod("w0", labels=labels) + _pod("w1", labels=labels))
    result = await simulate_async(
        [path], config_path=fakes.write_profile(tmp_path), registry=fakes.registry()
    )
    assert [(p.name, p.status) for p in result.pods] == [("w0", SCHEDULED), ("w1", SCHEDULED)]
    assert {p.node for p in result.pods} == {"n0", "n1"}
    assert all(p.annotations == {fakes.ANNOTATION: p.node} for p in result.pods)


def test_scheduled_events_read_from_bound_pods(write_yaml: WriteYaml) -> None:
    nodes = NODE.format(name="a", cpu="2")
    path = write_yaml(nodes + _pod("p0") + _pod("p1") + _pod("p2"))
    result = simulate([path], bind_hook=fail_first_binds(["shop/p0"], "etcd timeout"))
    events = result.port.events
    assert isinstance(events, EventLog)
    seen = [(e.type, e.reason, e.namespace, e.name, e.message) for e in events]
    failed = (
        'running Bind plugin "DefaultBinder": etcd timeout: pod shop/p0 on node a'  # kube-scheduler's words
    )
    assert ("Warning", "FailedScheduling", "shop", "p0", failed) in seen
    scheduled = [s for s in seen if s[1] == "Scheduled"]
    # p0's failed bind let p1 and p2 take the node.
    assert scheduled == [
        ("Normal", "Scheduled", "shop", "p1", "Successfully assigned shop/p1 to a"),
        ("Normal", "Scheduled", "shop", "p2", "Successfully assigned shop/p2 to a"),
    ]
    assert {e.reason for e in result.port.events_for("shop/p0")} == {"FailedScheduling"}
    assert [e.reason for e in result.port.events_for("shop/p2")] == ["Scheduled"]
    assert len(events) == len(seen) and events[-1] == list(events)[-1] and events[:] == list(events)
    assert all(isinstance(e, SimEvent) for e in events)


def test_simulate_never_writes_a_repr_per_pod(write_yaml: WriteYaml, monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncio.run (3.11) builds its task's repr, result included, while it restores the SIGINT
    handler: a generated SimResult repr would write one per pod, a large run's worth at once."""
    calls = []

    def counted(self: object) -> str:
        calls.append(self)
        return "PodResult(...)"

    monkeypatch.setattr(PodResult, "__repr__", counted)
    nodes = NODE.format(name="a", cpu="1")
    result = simulate([write_yaml(nodes + "".join(_pod(f"p{i}") for i in range(4)))])
    assert calls == []
    assert repr(result) == "SimResult(pods=4, scheduled=1, unschedulable=3, waiting=0, nodes=1, warnings=0)"


def test_pod_info_extra_created_on_first_use() -> None:
    pod = msgspec.convert({"metadata": {"name": "p", "namespace": "d", "uid": "u"}}, Pod)
    pending = PodInfo(pod, {})
    bound = PodInfo(pod, {})
    bound.keep_extra(pending)  # nothing parsed: nothing handed on
    assert pending.extra == {} and bound.extra == {} and bound.extra is not pending.extra
    pending.extra["Plugin/key"] = 1
    again = PodInfo(pod, {})
    again.keep_extra(pending)  # the same dict, so later writes are seen by both
    assert again.extra is pending.extra
    again.extra["Plugin/other"] = 2
    assert pending.extra == {"Plugin/key": 1, "Plugin/other": 2}
    fresh = PodInfo(pod, {})
    fresh.extra = {"x": 3}
    assert fresh.extra == {"x": 3}


#: What a run holds per extra pod (tracemalloc: what dropping the result frees, pods of one
#: template on 20 nodes, all bound): the pod's own strings and structs, its PodInfo, cache, queue
#: and plugin entries, the port's copy. Measured ~1,040 bytes; ~1,430 before the compact results,
#: events, assign records and shared empty metadata parts.
BYTES_PER_POD = 1_150


def _held_by_a_run(write_yaml: WriteYaml, pods: int) -> int:
    nodes = "".join(NODE.format(name=f"n{i}", cpu="64") for i in range(20))
    path = write_yaml(nodes + "".join(_pod(f"p{i}", cpu="100m") for i in range(pods)))
    gc.collect()
    tracemalloc.start()
    try:
        result = simulate([path])
        assert result.summary.scheduled == pods
        gc.collect()
        alive = tracemalloc.get_traced_memory()[0]
        del result
        gc.collect()
        return alive - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def test_memory_held_per_pod(write_yaml: WriteYaml) -> None:
    small, large = _held_by_a_run(write_yaml, 1000), _held_by_a_run(write_yaml, 2000)
    per_pod = (large - small) / 1000
    assert per_pod < BYTES_PER_POD, f"{per_pod:.0f} bytes per pod"


def test_loader_records_are_freed_before_the_run(write_yaml: WriteYaml) -> None:
    """The loader's record of each object (some 110 bytes a pod) is let go once the objects are
    fed: while pods bind, none is alive."""
    seen: list[int] = []

    def count_records(pod: Pod, node: str) -> None:
        if not seen:
            gc.unfreeze()  # the run froze what was loaded: frozen objects are not listed
            try:
                mine = (o for o in gc.get_objects() if isinstance(o, LoadedObject) and o.source == path)
                seen.append(sum(1 for _ in mine))
            finally:
                gc.freeze()

    nodes = NODE.format(name="a", cpu="4")
    path = str(write_yaml(nodes + _pod("p0") + _pod("p1")))
    result = simulate([path], bind_hook=count_records)
    assert result.summary.scheduled == 2
    assert seen == [0]
    # What the count looks for: the loader's records of this file (another test's may be alive).
    assert sum(o.source == path for o in load_cluster([path], kind_specs(in_tree_registry())).objects) == 3
