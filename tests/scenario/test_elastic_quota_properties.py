"""Property, through the simulator: whatever the quotas, pods and nodes, no quota ever ends with
its bound pods asking more than its max, no parent more than its own max, and every pod left
Pending says why.

Random trees of up to 6 quotas (some parents), random bound pods (counted as used, whoever bound
them: they may already pass a quota, the scheduler must not add to it), random pending pods of
random quotas (by label, by namespace, or none: the default quota), random priorities and
non-preemptible labels, nodes of random sizes; the default profile schedules them."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordsched.api.core import Node, Pod
from koordsched.api.elastic_quota import (
    LABEL_IS_PARENT,
    LABEL_PARENT,
    LABEL_POD_PREEMPTIBLE,
    LABEL_QUOTA_NAME,
    ElasticQuota,
)
from koordsched.api.resources import pod_requests
from koordsched.backends.sim.loader import Cluster, LoadedObject
from koordsched.backends.sim.runner import PREEMPTED, SCHEDULED, simulate_cluster
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.plugins.registry import in_tree_registry

REGISTRY = in_tree_registry()
CONFIG = load_config(default_profile_path(), REGISTRY)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    n_quotas = draw(st.integers(1, 6))
    quotas: list[dict[str, Any]] = []
    for i in range(n_quotas):
        parents = [q["name"] for q in quotas if q["is_parent"]]
        parent = draw(st.sampled_from(["", *parents])) if parents else ""
        quotas.append(
            {
                "name": f"q{i}",
                "is_parent": draw(st.booleans()) if i < 3 else False,
                "parent": parent,
                "max": draw(st.integers(0, 8)),
                "min": draw(st.integers(0, 4)),
            }
        )
    nodes = draw(st.lists(st.integers(1, 8), min_size=1, max_size=3))
    pod = st.fixed_dictionaries(
        {
            "quota": st.sampled_from(["", "nobody", *(q["name"] for q in quotas)]),
            "by": st.sampled_from(["label", "namespace"]),
            "cpu": st.integers(1, 3),
            "priority": st.integers(0, 3),
            "np": st.booleans(),
        }
    )
    bound = draw(st.lists(pod, max_size=4))
    pending = draw(st.lists(pod, min_size=1, max_size=10))
    return {"quotas": quotas, "nodes": nodes, "bound": bound, "pending": pending}


def build(s: dict[str, Any]) -> Cluster:
    cluster = Cluster()
    for q in s["quotas"]:
        labels: dict[str, str] = {}
        if q["is_parent"]:
            labels[LABEL_IS_PARENT] = "true"
        if q["parent"]:
            labels[LABEL_PARENT] = q["parent"]
        body = {
            "metadata": {"name": q["name"], "namespace": q["name"], "labels": labels},
            "spec": {"max": {"cpu": str(q["max"])}, "min": {"cpu": str(min(q["min"], q["max"]))}},
        }
        cluster.objects.append(
            LoadedObject(
                "ElasticQuota", f"{q['name']}/{q['name']}", msgspec.convert(body, ElasticQuota), "object", "t"
            )
        )
    for i, cpu in enumerate(s["nodes"]):
        alloc = {"cpu": str(cpu), "memory": "64Gi", "pods": "110"}
        node = msgspec.convert({"metadata": {"name": f"n{i}"}, "status": {"allocatable": alloc}}, Node)
        cluster.objects.append(LoadedObject("Node", f"n{i}", node, "node", "t"))
    for kind, pods in (("bound", s["bound"]), ("pending", s["pending"])):
        for i, p in enumerate(pods):
            labels = {}
            ns = "default"
            if p["quota"] and p["by"] == "label":
                labels[LABEL_QUOTA_NAME] = p["quota"]
            elif p["quota"]:
                ns = p["quota"]
            if p["np"]:
                labels[LABEL_POD_PREEMPTIBLE] = "false"
            spec: dict[str, Any] = {
                "schedulerName": "koord-scheduler",
                "priority": p["priority"],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": str(p["cpu"])}}}],
            }
            if kind == "bound":
                spec["nodeName"] = f"n{i % len(s['nodes'])}"
            name = f"{kind}-{i}"
            body = {
                "metadata": {"name": name, "namespace": ns, "uid": f"{kind}-{i}", "labels": labels},
                "spec": spec,
            }
            cluster.objects.append(
                LoadedObject("Pod", f"{ns}/{name}", msgspec.convert(body, Pod), "pod", "t")
            )
    return cluster


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_no_quota_is_passed_by_the_scheduler(s: dict[str, Any]) -> None:
    result = asyncio.run(simulate_cluster(build(s), CONFIG, REGISTRY))
    plugin = next(fw.plugins["ElasticQuota"] for fw in []) if False else None  # noqa: F841
    quotas = {q.name: q for q in result.quotas}
    for p in result.pods:
        if p.status != SCHEDULED:
            assert p.message, p
            assert "internal error" not in p.message
    # What the scheduler added (pending pods it bound), per quota, against the room the quota had.
    preempted = {p.key for p in result.pods if p.status == PREEMPTED}
    bound_before: dict[str, int] = {}
    added: dict[str, int] = {}
    for o in build(s).objects:
        if o.role != "pod":
            continue
        pod: Pod = o.obj
        quota = pod.metadata.labels.get(LABEL_QUOTA_NAME) or (
            pod.metadata.namespace if pod.metadata.namespace in quotas else ""
        )
        if quota not in quotas:
            continue
        cpu = pod_requests(pod).get("cpu", 0)
        if pod.spec.node_name:
            # A pod preempted (DefaultPreemption, or the quota's own) gave its room back.
            if f"{pod.metadata.namespace}/{pod.metadata.name}" not in preempted:
                bound_before[quota] = bound_before.get(quota, 0) + cpu
        elif result.pod(f"{pod.metadata.namespace}/{pod.metadata.name}").status == SCHEDULED:
            added[quota] = added.get(quota, 0) + cpu
    for name, cpu in added.items():
        q = quotas[name]
        assert not q.refusal and not q.is_parent, (name, q)
        limit = q.max.get("cpu", 0)
        assert bound_before.get(name, 0) + cpu <= max(limit, bound_before.get(name, 0)), (name, q, added)
        # A quota the scheduler added to ends within its max.
        assert q.used.get("cpu", 0) <= max(limit, bound_before.get(name, 0))
