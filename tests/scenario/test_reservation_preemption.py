"""Reservations and preemption through `simulate` (spec 4.3 AddPod/RemovePod, Filter, PostFilter).

A victim allocated from a reservation gives its requests back to that reservation only
(``preemptibleInRRs``); with ``enablePreemption`` the Reservation plugin preempts first and never
takes a pod labelled ``scheduling.koordinator.sh/disable-preemptible: "true"``.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, SimResult, simulate
from koordsched.config.default_profile import default_profile_path
from tests.builders import pod_manifest, yaml_doc
from tests.scenario.helpers import WriteYaml
from tests.scenario.test_reservation import GPU_NODE, held_gpus, minors_of, resv

NODES = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
"""

RESTRICTED = """
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {name: r1, uid: r1-uid}
spec:
  template:
    spec:
      schedulerName: koord-scheduler
      containers: [{name: c, resources: {requests: {cpu: "3"}}}]
  owners: [{labelSelector: {matchLabels: {app: owner}}}]
  allocatePolicy: Restricted
  allocateOnce: false
status: {phase: Available, nodeName: n1, allocatable: {cpu: "3"}}
"""


def bound(
    name: str, node: str, cpu: str, labels: str = "{}", annotations: str = "{}", priority: int = 0
) -> str:
    return f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {labels}, annotations: {annotations}}}
spec:
  schedulerName: koord-scheduler
  nodeName: {node}
  priority: {priority}
  containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


def pending(name: str, cpu: str, labels: str = "{}", priority: int = 1000, annotations: str = "{}") -> str:
    return f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {labels}, annotations: {annotations}}}
spec:
  schedulerName: koord-scheduler
  priority: {priority}
  containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


TO_R1 = '{scheduling.koordinator.sh/reservation-affinity: \'{"name": "r1"}\'}'
IN_R1 = '{scheduling.koordinator.sh/reservation-allocated: \'{"name": "r1", "uid": "r1-uid"}\'}'


def profile_with_preemption(tmp_path: Path) -> Path:
    """The default profile with ``enablePreemption: true`` in ReservationArgs."""
    text = default_profile_path().read_text()
    marker = "    pluginConfig:\n"
    assert marker in text
    args = (
        "      - name: Reservation\n"
        "        args: {apiVersion: kubescheduler.config.k8s.io/v1, kind: ReservationArgs,"
        " enablePreemption: true}\n"
    )
    path = tmp_path / "profile.yaml"
    path.write_text(text.replace(marker, marker + args, 1))
    return path


def test_a_high_priority_owner_preempts_inside_its_restricted_reservation(write_yaml: WriteYaml) -> None:
    # r1 (Restricted, 3 cpus) is all taken by a low-priority owner; n1 has 1 cpu beside it, n2 is
    # full of a pod of higher priority. The high-priority owner fits r1 only once the low one is
    # gone: its 3 cpus go back to r1.
    docs = NODES + RESTRICTED + bound("low", "n1", "3", "{app: owner}", IN_R1)
    docs += bound("vip", "n2", "4", priority=5000)
    # It must use r1 (reservation-affinity): fitting beside r1 is not enough.
    docs += pending("high", "3", "{app: owner}", annotations=TO_R1)
    result = simulate([write_yaml(docs)])
    low = result.pod("default/low")
    assert (low.status, low.node) == ("Preempted", "n1")
    high = result.pod("default/high")
    assert (high.status, high.node) == (SCHEDULED, "n1")
    allocated = json.loads(high.annotations["scheduling.koordinator.sh/reservation-allocated"])
    assert allocated == {"name": "r1", "uid": "r1-uid"}
    assert resv(result, "r1").owners == ["default/high"]


def test_a_victim_inside_another_reservation_frees_nothing_for_the_pod(write_yaml: WriteYaml) -> None:
    # n1: r1 holds 3 cpus for app=owner, all taken by 'low'; n2 is full of a pod outside any
    # reservation, of a higher priority than 'low'. A high-priority pod that owns nothing would
    # evict 'low' only to have r1 take the cpus back: n1 is no candidate; it preempts on n2.
    docs = NODES + RESTRICTED + bound("low", "n1", "3", "{app: owner}", IN_R1)
    docs += bound("filler", "n2", "4", priority=500) + pending("stranger", "2")
    result = simulate([write_yaml(docs)])
    preempted = [p.name for p in result.pods if p.status == "Preempted"]
    assert preempted == ["filler"]
    assert result.pod("default/stranger").node == "n2"


def test_the_reservation_preemption_spares_disable_preemptible_pods(
    write_yaml: WriteYaml, tmp_path: Path
) -> None:
    # A reservation (reserve pods have priority MaxInt32) needs 3 cpus: n1's pod is protected by
    # the label, n2's is not. With enablePreemption the reserve pod preempts on n2.
    reservation = """
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {name: hold}
spec:
  template:
    spec:
      schedulerName: koord-scheduler
      containers: [{name: c, resources: {requests: {cpu: "3"}}}]
  owners: [{labelSelector: {matchLabels: {app: owner}}}]
"""
    protected = '{scheduling.koordinator.sh/disable-preemptible: "true"}'
    # 'keep' has the lower priority: were it a victim at all, n1 would be the better candidate.
    docs = NODES + bound("keep", "n1", "3", protected, priority=-5) + bound("evictable", "n2", "3")
    docs += reservation
    result = simulate([write_yaml(docs)], config_path=profile_with_preemption(tmp_path))
    assert [p.name for p in result.pods if p.status == "Preempted"] == ["evictable"]
    r = resv(result, "hold")
    assert (r.phase, r.node) == ("Available", "n2")


def test_a_protected_pod_is_never_a_victim_of_a_reservation(write_yaml: WriteYaml, tmp_path: Path) -> None:
    reservation = """
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {name: hold}
spec:
  template:
    spec:
      schedulerName: koord-scheduler
      nodeName: n1
      containers: [{name: c, resources: {requests: {cpu: "3"}}}]
  owners: [{labelSelector: {matchLabels: {app: owner}}}]
"""
    protected = '{scheduling.koordinator.sh/disable-preemptible: "true"}'
    docs = NODES + bound("keep", "n1", "3", protected) + reservation
    result = simulate([write_yaml(docs)], config_path=profile_with_preemption(tmp_path))
    assert result.summary.preempted == 0
    r = resv(result, "hold")
    assert r.phase == "Pending"
    assert "Insufficient cpu" in r.message


def test_without_enable_preemption_a_reserve_pod_never_preempts(write_yaml: WriteYaml) -> None:
    reservation = """
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {name: hold}
spec:
  template:
    spec:
      schedulerName: koord-scheduler
      containers: [{name: c, resources: {requests: {cpu: "3"}}}]
  owners: [{labelSelector: {matchLabels: {app: owner}}}]
"""
    docs = NODES + bound("a", "n1", "3") + bound("b", "n2", "3") + reservation
    result = simulate([write_yaml(docs)])
    assert result.summary.preempted == 0
    assert resv(result, "hold").phase == "Pending"


# --- devices: an allocation through one reservation leaves the others' GPUs alone ---------------


def gpu_reservation(name: str, minors: range, order: int, policy: str = "Aligned") -> str:
    return f"""
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata:
  name: {name}
  uid: {name}-uid
  labels: {{scheduling.koordinator.sh/reservation-order: "{order}"}}
  annotations: {{scheduling.koordinator.sh/device-allocated: {held_gpus(minors)}}}
spec:
  template:
    spec:
      schedulerName: koord-scheduler
      containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: "{len(minors)}"}}}}}}]
  owners: [{{labelSelector: {{matchLabels: {{app: train}}}}}}]
  allocatePolicy: {policy}
  allocateOnce: false
status:
  phase: Available
  nodeName: g1
  allocatable: {{nvidia.com/gpu: "{len(minors)}"}}
"""


def gpu_pod(
    name: str, gpus: int, labels: str = "{app: train}", node: str = "", annotations: str = "{}"
) -> str:
    """A pod document asking ``gpus`` GPUs; ``labels`` and ``annotations`` are YAML flow mappings."""
    gpu = {"nvidia.com/gpu": str(gpus)}
    return yaml_doc(
        pod_manifest(
            name,
            None,
            None,
            uid="",
            labels=yaml.safe_load(labels),
            annotations=yaml.safe_load(annotations),
            node_name=node,
            requests=gpu,
            limits=gpu,
        )
    )


def run_gpus(write_yaml: WriteYaml, *docs: str) -> SimResult:
    return simulate([write_yaml(GPU_NODE + "".join(docs))])


def test_an_aligned_reservation_tops_up_from_free_gpus_not_from_another_reservation(
    write_yaml: WriteYaml,
) -> None:
    # a holds GPU 0, b holds GPU 1, GPUs 3-7 are taken: GPU 2 is the node's only free one. The pod
    # (2 GPUs, through a: the lower order) takes GPU 0 and GPU 2, never b's GPU 1.
    squatter = gpu_pod(
        "squatter",
        5,
        labels="{}",
        node="g1",
        annotations=f"{{scheduling.koordinator.sh/device-allocated: {held_gpus(range(3, 8))}}}",
    )
    result = run_gpus(
        write_yaml,
        gpu_reservation("a", range(0, 1), order=1),
        gpu_reservation("b", range(1, 2), order=2),
        squatter,
        gpu_pod("two", 2),
        gpu_pod("one", 1),
    )
    assert minors_of(result, "default/two") == [0, 2]
    assert json.loads(
        result.pod("default/two").annotations["scheduling.koordinator.sh/reservation-allocated"]
    ) == {
        "name": "a",
        "uid": "a-uid",
    }
    # b's GPU is still there for the next owner.
    assert minors_of(result, "default/one") == [1]


def test_a_pod_that_fits_beside_the_reservations_leaves_their_gpus(write_yaml: WriteYaml) -> None:
    # Restricted r (GPUs 0-1) cannot give 3 GPUs; beside it the node has GPUs 2-7. The owner takes
    # three of those, none of r's, and is not allocated from r.
    result = run_gpus(
        write_yaml, gpu_reservation("r", range(0, 2), order=1, policy="Restricted"), gpu_pod("three", 3)
    )
    three = result.pod("default/three")
    assert three.status == SCHEDULED
    assert not set(minors_of(result, "default/three")) & {0, 1}
    assert "scheduling.koordinator.sh/reservation-allocated" not in three.annotations


def test_a_reservation_is_never_a_victim_of_default_preemption(write_yaml: WriteYaml) -> None:
    # An Available reservation whose template has priority 0 holds 3 of n1's 4 cpus; a pod of
    # priority 1000 that owns nothing cannot evict it (there is no Pod to delete) and is not
    # nominated to n1 for it.
    docs = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {name: low-r, uid: low-r-uid}
spec:
  template:
    spec:
      schedulerName: koord-scheduler
      priority: 0
      containers: [{name: c, resources: {requests: {cpu: "3"}}}]
  owners: [{labelSelector: {matchLabels: {app: owner}}}]
status: {phase: Available, nodeName: n1, allocatable: {cpu: "3"}}
""" + pending("high", "3")
    result = simulate([write_yaml(docs)])
    high = result.pod("default/high")
    assert high.status == UNSCHEDULABLE
    assert (
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod." in high.message
    )
    assert result.port.nominations == {}
    assert resv(result, "low-r").phase == "Available"
