"""Pods, Nodes and PriorityClasses the API server would refuse: each is set aside with the API
server's message, in the simulator (a warning and the pod's result) and in a cluster (a
FailedScheduling event and condition); the other objects schedule as they would alone."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import msgspec
import pytest
from kubernetes_asyncio.client import Configuration

from koordsched.api.core import Node, Pod, PriorityClass, Taint, Toleration
from koordsched.api.field_errors import Refused
from koordsched.api.validation import check_node, check_pending_pod, check_priority_class, pod_errors
from koordsched.backends.kube.client import new_client
from koordsched.backends.kube.port import KubePort
from koordsched.backends.sim.runner import simulate
from koordsched.cli import main
from koordsched.config.errors import ConfigError
from koordsched.config.load import default_config, load_config
from koordsched.observability.metrics import SchedulerMetrics
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler
from tests.kube.fake_apiserver import PODS, FakeApiServer, pod_json
from tests.kube.helpers import eventually
from tests.scenario.helpers import WriteYaml

NODE = """
kind: Node
metadata: {{name: {name}}}
spec: {{taints: [{{key: k, effect: {effect}}}]}}
status: {{allocatable: {{cpu: "4", memory: 8Gi, pods: "10"}}}}
"""


def pod(
    name: str, extra: str = "", containers: str = "[{name: c, resources: {requests: {cpu: '1'}}}]"
) -> str:
    return (
        f"kind: Pod\nmetadata: {{name: {name}}}\n"
        f"spec: {{schedulerName: koord-scheduler, containers: {containers}"
        f"{', ' + extra if extra else ''}}}\n"
    )


TOLERATE_ALL = "tolerations: [{operator: Exists}]"
PORT_RANGE = "must be between 1 and 65535, inclusive"
BOGUS = (
    'Pod "bogus" is invalid: spec.tolerations[0].operator: Unsupported value: "Bogus": '
    'supported values: "Equal", "Exists"'
)


def cluster(*docs: str) -> str:
    return "---\n".join(docs)


def test_toleration_operator_bogus_is_refused_others_schedule(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        cluster(
            NODE.format(name="n1", effect="NoSchedule"),
            pod("bogus", "tolerations: [{key: k, operator: Bogus, effect: NoSchedule}]"),
            pod("good", TOLERATE_ALL),
        )
    )
    result = simulate([path])
    bad = result.pod("default/bogus")
    assert (bad.status, bad.message) == ("Unschedulable", BOGUS)
    assert result.pod("default/good").node == "n1"
    assert any("(Pod default/bogus): " + BOGUS + "; not scheduled" in w for w in result.warnings)
    events = result.port.events_for("default/bogus")
    assert [(e.reason, e.message) for e in events] == [("FailedScheduling", BOGUS)]
    assert result.port.conditions["default/bogus"].status == "False"


@pytest.mark.parametrize(
    ("containers", "expected"),
    [
        (
            "[{name: c, ports: [{containerPort: 80, hostPort: 70000}]}]",
            "spec.containers[0].ports[0].hostPort: Invalid value: 70000: " + PORT_RANGE,
        ),
        (
            "[{name: c, ports: [{containerPort: 70000}]}]",
            "spec.containers[0].ports[0].containerPort: Invalid value: 70000: " + PORT_RANGE,
        ),
        (
            "[{name: c, ports: [{containerPort: 0}]}]",
            "spec.containers[0].ports[0].containerPort: Required value",
        ),
        (
            "[{name: c, ports: [{containerPort: 80, hostPort: -1}]}]",
            "spec.containers[0].ports[0].hostPort: Invalid value: -1: " + PORT_RANGE,
        ),
        (
            "[{name: c, ports: [{containerPort: 80, protocol: tcp}]}]",
            'spec.containers[0].ports[0].protocol: Unsupported value: "tcp": '
            'supported values: "SCTP", "TCP", "UDP"',
        ),
    ],
)
def test_port_out_of_range_is_refused(write_yaml: WriteYaml, containers: str, expected: str) -> None:
    path = write_yaml(
        cluster(NODE.format(name="n1", effect="NoSchedule"), pod("p", TOLERATE_ALL, containers))
    )
    result = simulate([path])
    p = result.pod("default/p")
    assert p.status == "Unschedulable"
    assert p.message == f'Pod "p" is invalid: {expected}'


def test_several_errors_are_listed_as_the_api_server_lists_them() -> None:
    p = Pod()
    p.spec.tolerations = [Toleration(key="a", operator="Exists", value="x"), Toleration(operator="Equal")]
    p.spec.priority = 2**40
    errs = pod_errors(p)
    assert errs == [
        'spec.tolerations[0].operator: Invalid value: "Exists": '
        "value must be empty when `operator` is 'Exists'",
        'spec.tolerations[1].operator: Invalid value: "Equal": operator must be Exists when `key` is empty, '
        'which means "match all values and all keys"',
        "spec.priority: Invalid value: 1099511627776: must be a 32-bit integer (-2147483648 to 2147483647)",
    ]
    p.metadata.name = "x"
    with pytest.raises(Refused, match=r'^Pod "x" is invalid: \[spec\.tolerations\[0\]'):
        check_pending_pod(p)
    p.spec.node_name = "n1"  # bound: it runs whatever it says
    check_pending_pod(p)


def test_toleration_effect_and_seconds() -> None:
    p = Pod()
    p.spec.tolerations = [Toleration(key="a", operator="Exists", effect="Foo", toleration_seconds=5)]
    assert pod_errors(p) == [
        'spec.tolerations[0].effect: Invalid value: "Foo": '
        "effect must be 'NoExecute' when `tolerationSeconds` is set",
        'spec.tolerations[0].effect: Unsupported value: "Foo": '
        'supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"',
    ]


def test_node_with_taint_effect_foo_is_left_out(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_yaml(
        cluster(
            NODE.format(name="odd", effect="Foo"),
            NODE.format(name="n1", effect="NoSchedule"),
            pod("a", TOLERATE_ALL),
            pod("b", TOLERATE_ALL),
        )
    )
    result = simulate([path])
    assert {result.pod("default/a").node, result.pod("default/b").node} == {"n1"}
    expected = (
        'node odd: Node "odd" is invalid: spec.taints[0].effect: Unsupported value: "Foo": '
        'supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"'
    )
    assert expected in result.warnings
    assert main(["simulate", str(path)]) == 0
    assert f"warning: {expected}" in capsys.readouterr().err


def test_node_fixed_later_comes_back() -> None:
    reg = in_tree_registry()
    sched = Scheduler(default_config(reg), reg, _NullPort(), VirtualClock())
    good = Node()
    good.metadata.name = "n"
    good.status.allocatable = {"cpu": "1", "pods": "5"}
    bad = msgspec.structs.replace(
        good, spec=msgspec.structs.replace(good.spec, taints=[Taint(key="k", effect="")])
    )
    sched.on_node_add(good)
    sched.on_node_update(good, bad)
    assert sched.cache.node("n") is None
    assert "spec.taints[0].effect: Required value" in sched.cache.bad_nodes["n"]
    sched.on_node_update(bad, good)
    assert sched.cache.node("n") is not None and "n" not in sched.cache.bad_nodes
    with pytest.raises(Refused):
        check_node(bad)


def test_priority_class_beyond_int32_is_ignored(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        cluster(
            "kind: PriorityClass\nmetadata: {name: huge}\nvalue: 1099511627776\n",
            "kind: PriorityClass\nmetadata: {name: ok}\nvalue: 1000\n",
            NODE.format(name="n1", effect="NoSchedule"),
            pod("named-huge", TOLERATE_ALL + ", priorityClassName: huge"),
            pod("named-ok", TOLERATE_ALL + ", priorityClassName: ok"),
        )
    )
    result = simulate([path])
    assert result.pod("default/named-huge").message == "no PriorityClass with name huge was found"
    assert result.pod("default/named-ok").node == "n1"
    assert any(
        'PriorityClass "huge" is invalid: value: Invalid value: 1099511627776: must be a 32-bit integer' in w
        and w.endswith("pods naming it fail as if it did not exist")
        for w in result.warnings
    )
    pc = PriorityClass(value=-(2**31) - 1)
    with pytest.raises(Refused):
        check_priority_class(pc)


class _NullPort:
    async def bind(self, *args: object) -> None:
        raise AssertionError("no bind expected")

    def scheduled(self, *args: object) -> None: ...

    def unschedulable(self, *args: object) -> None: ...

    def invalid_pod(self, *args: object) -> None: ...


@pytest.fixture
async def kube_port(api: FakeApiServer) -> AsyncIterator[KubePort]:
    client = new_client(Configuration(host=api.url), qps=1000, burst=1000, metrics=SchedulerMetrics())
    port = KubePort(client, hostname="h", event_flush_interval=0.05)
    try:
        yield port
    finally:
        await port.close()
        await client.close()


async def test_run_reports_a_refused_pod_with_event_and_condition(
    api: FakeApiServer, kube_port: KubePort, caplog: pytest.LogCaptureFixture
) -> None:
    raw = pod_json("bogus")
    raw["spec"]["tolerations"] = [{"key": "k", "operator": "Bogus"}]
    api.add(PODS, raw)
    reg = in_tree_registry()
    sched = Scheduler(default_config(reg, "koord-scheduler"), reg, kube_port, VirtualClock())
    with caplog.at_level(logging.WARNING):
        sched.on_pod_add(msgspec.convert(api.get(PODS, "default/bogus"), Pod))
    expected = 'Pod "bogus" is invalid: spec.tolerations[0].operator: Unsupported value: "Bogus"'
    assert any(expected in r.getMessage() for r in caplog.records)
    await eventually(lambda: any(e["reason"] == "FailedScheduling" for e in api.events.values()))
    event = next(e for e in api.events.values() if e["reason"] == "FailedScheduling")
    assert event["note"].startswith(expected)

    def condition() -> dict[str, str] | None:
        for c in api.get(PODS, "default/bogus").get("status", {}).get("conditions", []):
            if c["type"] == "PodScheduled":
                return dict(c)
        return None

    await eventually(lambda: condition() is not None)
    cond = condition()
    assert cond is not None and cond["status"] == "False" and cond["message"].startswith(expected)
    assert len(sched.queue) == 0
    await asyncio.sleep(0)


@pytest.mark.parametrize("q", ["-4", "-99999999999999999999", "-1e4000"])
def test_node_with_negative_allocatable_is_left_out(write_yaml: WriteYaml, q: str) -> None:
    """The API server refuses a negative capacity; one below int64 also crashed the snapshot."""
    node = NODE.format(name="odd", effect="NoSchedule").replace('cpu: "4"', f'cpu: "{q}"')
    path = write_yaml(cluster(node, NODE.format(name="n1", effect="NoSchedule"), pod("a", TOLERATE_ALL)))
    result = simulate([path])
    assert result.pod("default/a").node == "n1"
    expected = f'node odd: Node "odd" is invalid: status.allocatable[cpu]: Invalid value: "{q}": must be '
    expected += "greater than or equal to 0"
    assert any(w.startswith(expected) for w in result.warnings), result.warnings


def test_preferred_affinity_weights_outside_1_100_are_refused(write_yaml: WriteYaml) -> None:
    """A weight of 2^70 overflowed NodeAffinity's int64 scores: "internal error" on the pod."""
    affinity = (
        "affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: "
        "[{weight: 1180591620717411303424, preference: {matchExpressions: [{key: k, operator: Exists}]}}]}}"
    )
    path = write_yaml(
        cluster(
            NODE.format(name="n1", effect="NoSchedule"),
            NODE.format(name="n2", effect="NoSchedule"),
            pod("heavy", TOLERATE_ALL + ", " + affinity),
            pod("plain", TOLERATE_ALL),
        )
    )
    result = simulate([path])
    assert result.pod("default/plain").status == "Scheduled"
    assert result.pod("default/heavy").message == (
        'Pod "heavy" is invalid: spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution'
        "[0].weight: Invalid value: 1180591620717411303424: must be in the range 1-100"
    )


def test_node_affinity_args_weight_must_fit_int32() -> None:
    config = (
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles: [{schedulerName: a, pluginConfig: [{name: NodeAffinity, args: {addedAffinity: "
        "{preferredDuringSchedulingIgnoredDuringExecution: [{weight: 4294967296, preference: "
        "{matchExpressions: [{key: k, operator: Exists}]}}]}}}]}]\n"
    )
    with pytest.raises(ConfigError, match=r"preferredDuringSchedulingIgnoredDuringExecution\[0\]\.weight: "):
        load_config(config.encode(), in_tree_registry())
