"""The Koordinator CRDs koordsched reads: manifests, examples that must pass them, and how they are watched.

No API server here: the manifests are checked for the rules kube-apiserver applies to
apiextensions.k8s.io/v1 (structural schemas, protected groups), and the Device and
NodeResourceTopology objects of ``examples/`` are validated against the schemas as the server
would (types, required fields, int32 ranges, quantity patterns) and also checked for fields the
server would prune. The real kube-apiserver 1.20 accepted both manifests and round-tripped the
example objects (see the report of the change that added them); the e2e suite is where a
server-backed check belongs.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from koordsched.api import kinds as api_kinds
from koordsched.api.koordinator import (
    Device,
    DeviceInfo,
    DeviceTopology,
    NodeResourceTopology,
    ResourceInfo,
    VirtualFunction,
    VirtualFunctionGroup,
    Zone,
)
from koordsched.api.slo import (
    AggregatedUsage,
    NodeMetric,
    NodeMetricCollectPolicy,
    NodeMetricInfo,
    NodeMetricSpec,
    NodeMetricStatus,
    PodMetricInfo,
    ResourceMap,
)
from koordsched.backends.kube.backoff import Backoff
from koordsched.backends.kube.client import KubeClient, new_client
from koordsched.backends.kube.handlers import CRD_KINDS, PLUGIN_KINDS, reflectors_for
from koordsched.backends.kube.kinds import resource_kind
from koordsched.backends.kube.reflector import Reflector
from koordsched.backends.sim.loader import kind_specs, load_cluster
from koordsched.plugins.registry import in_tree_registry
from tests.kube.fake_apiserver import Collection, FakeApiServer
from tests.kube.helpers import eventually

DEVICES = resource_kind(api_kinds.DEVICES, ("DeviceShare",))
NODE_RESOURCE_TOPOLOGIES = resource_kind(api_kinds.NODE_RESOURCE_TOPOLOGIES, ("NodeNUMAResource",))
NODE_METRICS = resource_kind(api_kinds.NODE_METRICS, ("LoadAwareScheduling",))
RESERVATIONS = resource_kind(api_kinds.RESERVATIONS, ("Reservation",))
KINDS = kind_specs(in_tree_registry())
ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "deploy" / "crds"
DEVICE_CRD = CRD_DIR / "scheduling.koordinator.sh_devices.yaml"
NRT_CRD = CRD_DIR / "topology.node.k8s.io_noderesourcetopologies.yaml"
NM_CRD = CRD_DIR / "slo.koordinator.sh_nodemetrics.yaml"
EXAMPLES = [
    ROOT / "examples" / "gpu-numa-cluster.yaml",
    ROOT / "examples" / "seed-pods.yaml",
    ROOT / "examples" / "mixed-workloads.yaml",
]

Schema = dict[str, Any]


def load(path: Path) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert len(docs) == 1, f"{path}: one CRD per file"
    doc = docs[0]
    assert isinstance(doc, dict)
    return doc


def version_schema(crd: dict[str, Any]) -> Schema:
    (version,) = crd["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


# --- the manifests ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "group", "kind", "plural", "singular"),
    [
        (DEVICE_CRD, "scheduling.koordinator.sh", "Device", "devices", "device"),
        (
            NRT_CRD,
            "topology.node.k8s.io",
            "NodeResourceTopology",
            "noderesourcetopologies",
            "noderesourcetopology",
        ),
        (NM_CRD, "slo.koordinator.sh", "NodeMetric", "nodemetrics", "nodemetric"),
    ],
)
def test_identity(path: Path, group: str, kind: str, plural: str, singular: str) -> None:
    crd = load(path)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{plural}.{group}"
    spec = crd["spec"]
    assert spec["group"] == group
    assert spec["scope"] == "Cluster"
    assert spec["names"]["kind"] == kind
    assert spec["names"]["listKind"] == f"{kind}List"
    assert spec["names"]["plural"] == plural
    assert spec["names"]["singular"] == singular
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1"
    assert version["served"] is True
    assert version["storage"] is True


@pytest.mark.parametrize("path", [DEVICE_CRD, NM_CRD], ids=lambda p: p.name)
def test_status_subresource(path: Path) -> None:
    (version,) = load(path)["spec"]["versions"]
    assert version["subresources"] == {"status": {}}


def test_nrt_carries_the_protected_group_approval() -> None:
    """kube-apiserver refuses a v1 CRD in a *.k8s.io group without api-approved.kubernetes.io."""
    crd = load(NRT_CRD)
    assert crd["spec"]["group"].endswith(".k8s.io")
    approval = crd["metadata"]["annotations"]["api-approved.kubernetes.io"]
    assert approval.startswith("https://github.com/kubernetes/enhancements/pull/")


def test_kustomization_lists_both() -> None:
    kust = yaml.safe_load((CRD_DIR / "kustomization.yaml").read_text())
    assert kust["kind"] == "Kustomization"
    expected = [DEVICE_CRD.name, NRT_CRD.name, NM_CRD.name, "scheduling.koordinator.sh_reservations.yaml"]
    expected.append("scheduling.sigs.k8s.io_podgroups.yaml")
    expected.append("scheduling.sigs.k8s.io_elasticquotas.yaml")
    expected.append("scheduling.koordinator.sh_clusternetworktopologies.yaml")
    assert sorted(kust["resources"]) == sorted(expected)
    for name in kust["resources"]:
        assert (CRD_DIR / name).is_file()


_VALUE_ONLY = {
    "type",
    "description",
    "default",
    "additionalProperties",
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
}


def structural_errors(schema: Schema, path: str = "", *, root: bool = True) -> Iterator[str]:
    """The structural-schema rules of apiextensions.k8s.io/v1 (those these manifests can break)."""
    if schema.get("x-kubernetes-int-or-string"):
        assert "type" not in schema, f"{path}: int-or-string must not set type"
        for branch in schema.get("anyOf", []):
            if set(branch) != {"type"} or branch["type"] not in ("integer", "string"):
                yield f"{path}: int-or-string anyOf may only list type integer and string"
        return
    for key in ("anyOf", "allOf", "oneOf", "not"):
        for branch in schema.get(key, []) if key != "not" else [schema.get("not", {})]:
            if _VALUE_ONLY & set(branch):
                yield f"{path}.{key}: value validations only ({sorted(_VALUE_ONLY & set(branch))})"
    kind = schema.get("type")
    if kind is None and not schema.get("x-kubernetes-preserve-unknown-fields"):
        yield f"{path or '<root>'}: no type"
    if "properties" in schema and "additionalProperties" in schema:
        yield f"{path}: properties and additionalProperties are exclusive"
    if ("properties" in schema or "additionalProperties" in schema) and kind != "object":
        yield f"{path}: properties need type object"
    if "items" in schema and kind != "array":
        yield f"{path}: items need type array"
    if kind == "array" and "items" not in schema:
        yield f"{path}: an array needs items"
    for name, sub in schema.get("properties", {}).items():
        if root and name == "metadata" and set(sub) - {"type"}:
            yield "metadata: only type object is allowed at the root"
        yield from structural_errors(sub, f"{path}.{name}", root=False)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        yield from structural_errors(extra, f"{path}.*", root=False)
    if isinstance(schema.get("items"), dict):
        yield from structural_errors(schema["items"], f"{path}[]", root=False)


@pytest.mark.parametrize("path", [DEVICE_CRD, NRT_CRD, NM_CRD], ids=lambda p: p.name)
def test_schemas_are_structural(path: Path) -> None:
    schema = version_schema(load(path))
    assert schema["type"] == "object"
    assert list(structural_errors(schema)) == []


def test_structural_check_catches_mistakes() -> None:
    bad: Schema = {
        "type": "object",
        "properties": {
            "a": {"properties": {"b": {"type": "string"}}},
            "c": {"type": "array"},
            "d": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
            "e": {"anyOf": [{"type": "string"}]},
        },
    }
    errors = list(structural_errors(bad))
    assert any(e.startswith(".a: no type") for e in errors)
    assert any(".c: an array needs items" in e for e in errors)
    assert any(".d: properties and additionalProperties" in e for e in errors)
    assert any(".e.anyOf" in e for e in errors)


# --- the schemas cover every field koordsched reads ----------------------------------------------


def wire_names(struct: type[msgspec.Struct]) -> set[str]:
    return {f.encode_name for f in msgspec.structs.fields(struct)}


def props(schema: Schema, *path: str) -> Schema:
    for step in path:
        if step == "[]":
            schema = schema["items"]
        elif step == "*":
            schema = schema["additionalProperties"]
        else:
            schema = schema["properties"][step]
    return schema


@pytest.mark.parametrize(
    ("path", "at", "struct"),
    [
        (DEVICE_CRD, (), Device),
        (DEVICE_CRD, ("spec", "devices", "[]"), DeviceInfo),
        (DEVICE_CRD, ("spec", "devices", "[]", "topology"), DeviceTopology),
        (DEVICE_CRD, ("spec", "devices", "[]", "vfGroups", "[]"), VirtualFunctionGroup),
        (DEVICE_CRD, ("spec", "devices", "[]", "vfGroups", "[]", "vfs", "[]"), VirtualFunction),
        (NRT_CRD, (), NodeResourceTopology),
        (NRT_CRD, ("zones", "[]"), Zone),
        (NRT_CRD, ("zones", "[]", "resources", "[]"), ResourceInfo),
        (NM_CRD, (), NodeMetric),
        (NM_CRD, ("spec",), NodeMetricSpec),
        (NM_CRD, ("spec", "metricCollectPolicy"), NodeMetricCollectPolicy),
        (NM_CRD, ("status",), NodeMetricStatus),
        (NM_CRD, ("status", "nodeMetric"), NodeMetricInfo),
        (NM_CRD, ("status", "nodeMetric", "nodeUsage"), ResourceMap),
        (NM_CRD, ("status", "nodeMetric", "aggregatedNodeUsages", "[]"), AggregatedUsage),
        (NM_CRD, ("status", "nodeMetric", "aggregatedNodeUsages", "[]", "usage", "*"), ResourceMap),
        (NM_CRD, ("status", "podsMetric", "[]"), PodMetricInfo),
        (NM_CRD, ("status", "podsMetric", "[]", "podUsage"), ResourceMap),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_no_field_koordsched_reads_is_pruned(
    path: Path, at: tuple[str, ...], struct: type[msgspec.Struct]
) -> None:
    """A field missing from the schema is silently dropped by the API server: plugins would never see it."""
    schema = props(version_schema(load(path)), *at)
    assert wire_names(struct) <= set(schema["properties"])


# --- the examples pass the schemas ----------------------------------------------------------------

INT32 = (-(2**31), 2**31 - 1)


def validate(value: Any, schema: Schema, path: str = "") -> Iterator[str]:
    """Schema validation as the API server does it, plus "would be pruned" for unknown fields."""
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            yield f"{path}: want int or string, got {value!r}"
        elif isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
            yield f"{path}: {value!r} does not match the quantity pattern"
        return
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            yield f"{path}: want object, got {value!r}"
            return
        for req in schema.get("required", []):
            if req not in value:
                yield f"{path}: missing required {req}"
        known = schema.get("properties")
        if known is None and "additionalProperties" not in schema:
            return  # metadata: validated by the server's own rules
        for key, sub in value.items():
            if known is not None and key in known:
                yield from validate(sub, known[key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                yield from validate(sub, schema["additionalProperties"], f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                yield f"{path}.{key}: unknown field, the API server would prune it"
    elif kind == "array":
        if not isinstance(value, list):
            yield f"{path}: want array, got {value!r}"
            return
        for i, item in enumerate(value):
            yield from validate(item, schema["items"], f"{path}[{i}]")
    elif kind == "string":
        if not isinstance(value, str):
            yield f"{path}: want string, got {value!r}"
    elif kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            yield f"{path}: want integer, got {value!r}"
        elif schema.get("format") == "int32" and not INT32[0] <= value <= INT32[1]:
            yield f"{path}: {value} is out of int32 range"
    elif kind == "boolean" and not isinstance(value, bool):
        yield f"{path}: want boolean, got {value!r}"


def example_objects(kind: str) -> list[dict[str, Any]]:
    docs = [doc for path in EXAMPLES for doc in yaml.safe_load_all(path.read_text())]
    return [doc for doc in docs if isinstance(doc, dict) and doc.get("kind") == kind]


def test_the_validator_catches_mistakes() -> None:
    schema = version_schema(load(DEVICE_CRD))
    bad = {
        "spec": {
            "devices": [
                {"type": "gpu", "minor": "0", "resources": {"koordinator.sh/gpu-core": "lots"}, "uuid": "x"},
                {"health": True, "topology": {"socketID": 0, "nodeID": 2**31, "pcieID": "p"}},
            ]
        }
    }
    errors = list(validate(bad, schema))
    assert ".spec.devices[0]: missing required health" in errors
    assert any(".minor: want integer" in e for e in errors)
    assert any("'lots' does not match" in e for e in errors)
    assert any(".uuid: unknown field" in e for e in errors)
    assert any("out of int32 range" in e for e in errors)


@pytest.mark.parametrize(
    ("kind", "crd"), [("Device", DEVICE_CRD), ("NodeResourceTopology", NRT_CRD), ("NodeMetric", NM_CRD)]
)
def test_examples_pass_the_schema(kind: str, crd: Path) -> None:
    objects = example_objects(kind)
    assert objects, f"no {kind} in the examples"
    schema = version_schema(load(crd))
    for obj in objects:
        assert list(validate(obj, schema, obj["metadata"]["name"])) == []


def test_examples_are_consistent() -> None:
    """Device CRs match node allocatable (spec 1.4), NRT zones add up, CPU topologies are complete."""
    cluster = load_cluster(EXAMPLES[:1], KINDS)
    nodes = {o.key: o.obj for o in cluster.objects if o.kind == "Node"}
    devices = {o.key: o.obj for o in cluster.objects if o.kind == "Device"}
    nrts = {o.key: o.obj for o in cluster.objects if o.kind == "NodeResourceTopology"}
    assert set(nrts) == set(nodes)
    assert set(devices) <= set(nodes)
    assert len(devices) >= 3
    gi = 1024**3
    for name, dev in devices.items():
        alloc = nodes[name].status.allocatable
        gpus = [d for d in dev.spec.devices if d.type == "gpu" and d.health]
        nics = [d for d in dev.spec.devices if d.type == "rdma" and d.health]
        assert int(alloc["nvidia.com/gpu"]) == len(gpus)
        for res in ("koordinator.sh/gpu", "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory-ratio"):
            assert int(alloc[res]) == 100 * len(gpus), (name, res)
        assert int(alloc["koordinator.sh/gpu.shared"]) == 100 * len(gpus)
        assert int(alloc["koordinator.sh/rdma"]) == 100 * len(nics)
        mem = sum(int(str(d.resources["koordinator.sh/gpu-memory"]).removesuffix("Gi")) for d in gpus)
        assert str(alloc["koordinator.sh/gpu-memory"]) == f"{mem}Gi"
        assert len({d.minor for d in dev.spec.devices if d.type == "gpu"}) == 8
        # Each PCIe switch: one NUMA node, two GPUs and one NIC with a VF group of 4+ VFs.
        by_pcie: dict[str, list[DeviceInfo]] = {}
        for d in dev.spec.devices:
            assert d.topology is not None
            by_pcie.setdefault(d.topology.pcie_id, []).append(d)
        assert len(by_pcie) == 4
        for members in by_pcie.values():
            assert len({d.topology.node_id for d in members if d.topology}) == 1
            assert sorted(d.type for d in members) == ["gpu", "gpu", "rdma"]
            (nic,) = [d for d in members if d.type == "rdma"]
            assert all(len(g.vfs) >= 4 and all(vf.bus_id for vf in g.vfs) for g in nic.vf_groups)
        assert gi  # units above are Gi strings throughout
    for name, nrt in nrts.items():
        node = nodes[name]
        cpu = sum(int(str(r.allocatable)) for z in nrt.zones for r in z.resources if r.name == "cpu")
        assert cpu == int(str(node.status.allocatable["cpu"]))
        detail = msgspec.json.decode(nrt.metadata.annotations["node.koordinator.sh/cpu-topology"])["detail"]
        assert sorted(c["id"] for c in detail) == list(range(cpu))
        assert {z.name for z in nrt.zones} == {f"node-{c['node']}" for c in detail}
        assert all(z.type == "Node" for z in nrt.zones)


# --- how the kinds are fed in ---------------------------------------------------------------------


def test_kube_kinds_point_at_the_crds() -> None:
    pairs = (
        (DEVICES, DEVICE_CRD),
        (NODE_RESOURCE_TOPOLOGIES, NRT_CRD),
        (NODE_METRICS, NM_CRD),
        (RESERVATIONS, CRD_DIR / "scheduling.koordinator.sh_reservations.yaml"),
    )
    for kind, crd_path in pairs:
        crd = load(crd_path)["spec"]
        assert kind.kind == crd["names"]["kind"]
        assert kind.path == f"/apis/{crd['group']}/{crd['versions'][0]['name']}/{crd['names']['plural']}"
        assert not kind.namespaced
    # Optional: Koordinator's CRDs, and CSIStorageCapacity (storage.k8s.io/v1 from 1.24).
    assert {k.kind for k in CRD_KINDS} == {
        "Device",
        "NodeResourceTopology",
        "NodeMetric",
        "Reservation",
        "CSIStorageCapacity",
        "PodGroup",
        "ElasticQuota",
    }
    # Besides the CRDs (optional), the plugins read core and apps kinds every cluster serves
    # (required: their reflectors must sync).
    served = {"Namespace", "Service", "ReplicationController", "ReplicaSet", "StatefulSet"}
    served |= {"StorageClass", "PersistentVolume", "PersistentVolumeClaim", "CSINode", "CSIDriver"}
    served.add("PodDisruptionBudget")
    served.add("ConfigMap")  # DeviceShare's vNPU templates
    required = [k for k in PLUGIN_KINDS if not k.optional]
    assert {k.kind for k in required} == served
    assert all(k.optional for k in CRD_KINDS)


def test_simulator_takes_the_kinds() -> None:
    for kind, struct in (
        ("Device", Device),
        ("NodeResourceTopology", NodeResourceTopology),
        ("NodeMetric", NodeMetric),
    ):
        spec = KINDS[kind]
        assert spec.type is struct
        assert not spec.namespaced
        assert spec.role == "object"
    cluster = load_cluster(EXAMPLES[:1], KINDS)
    assert not cluster.warnings
    devices = [o for o in cluster.objects if o.kind == "Device"]
    assert devices and all(o.key == o.obj.metadata.name and o.role == "object" for o in devices)
    # Objects come before nodes and pods, so plugins see them when nodes arrive.
    order = [o.kind for o in cluster.feed_order()]
    assert order.index("Node") > max(
        i for i, k in enumerate(order) if k in ("Device", "NodeResourceTopology")
    )


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_add(self, obj: Any) -> None:
        self.events.append(("add", obj.metadata.name))

    def on_update(self, old: Any, new: Any) -> None:
        self.events.append(("update", new.metadata.name))

    def on_delete(self, obj: Any) -> None:
        self.events.append(("delete", obj.metadata.name))


@pytest.fixture
async def api() -> AsyncIterator[FakeApiServer]:
    server = FakeApiServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def client(api: FakeApiServer) -> AsyncIterator[KubeClient]:
    from kubernetes_asyncio.client import Configuration

    c = new_client(Configuration(host=api.url), qps=1000, burst=1000)
    try:
        yield c
    finally:
        await c.close()


def device_json(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": name},
        "spec": {
            "devices": [
                {"type": "gpu", "minor": 0, "health": True, "resources": {"koordinator.sh/gpu-core": "100"}}
            ]
        },
    }


def fast() -> Backoff:
    return Backoff(initial=0.01, cap=0.05, jitter=0.0)


@pytest.mark.parametrize("status", [404, 403])
async def test_missing_crd_counts_as_empty_and_is_retried(
    api: FakeApiServer, client: KubeClient, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Readiness must not wait for a CRD the cluster may never have; it is picked up once installed."""
    path = DEVICES.path
    if status == 403:
        api.fail("GET", path, 403, times=3)
    rec = Recorder()
    r = Reflector(client, DEVICES, rec, backoff=fast(), optional=True, recheck=fast())
    caplog.set_level(logging.INFO, logger="koordsched.backends.kube.reflector")
    r.start()
    try:
        await eventually(lambda: r.synced.is_set())
        assert r.store == {}
        assert r.unavailable
        await eventually(lambda: len(api.requests_to("GET", path)) >= 3)  # retried, with backoff
        assert not any(q.query.get("watch") for q in api.requests_to("GET", path))
        warnings = [m for m in caplog.records if m.levelno == logging.WARNING]
        assert len(warnings) == 1, "logged once, not per retry"
        assert ("not served" if status == 404 else "forbidden") in warnings[0].getMessage()

        # The CRD is installed (or RBAC fixed): objects arrive, then the watch delivers changes.
        api.collections[path] = Collection(path, False, "Device")
        api.add(path, device_json("gpu-a"))
        await eventually(lambda: ("add", "gpu-a") in rec.events)
        assert not r.unavailable
        await eventually(lambda: api.watchers(path) == 1)
        api.add(path, device_json("gpu-b"))
        await eventually(lambda: ("add", "gpu-b") in rec.events)
        assert any("served now" in m.getMessage() for m in caplog.records)

        # The CRD is deleted again: what was seen is delivered as deleted.
        api.close_watches()
        del api.collections[path]
        await eventually(lambda: {("delete", "gpu-a"), ("delete", "gpu-b")} <= set(rec.events))
        assert r.store == {}
    finally:
        await r.stop()


async def test_other_failures_still_block_sync(api: FakeApiServer, client: KubeClient) -> None:
    """A 500 is not "no CRD": the reflector keeps retrying and does not pretend to be synced."""
    api.collections[DEVICES.path] = Collection(DEVICES.path, False, "Device")
    api.fail("GET", DEVICES.path, 500, times=1000)
    r = Reflector(client, DEVICES, Recorder(), backoff=fast(), optional=True, recheck=fast())
    r.start()
    try:
        await eventually(lambda: len(api.requests_to("GET", DEVICES.path)) >= 3)
        assert not r.synced.is_set()
    finally:
        await r.stop()


def test_reflectors_for_watches_the_crds(client: KubeClient) -> None:
    from koordsched.observability.metrics import SchedulerMetrics

    first, pods = reflectors_for(client, object(), SchedulerMetrics())  # type: ignore[arg-type]
    optional = [r for r in first if r.optional]
    assert sorted(r.kind.kind for r in optional) == [
        "CSIStorageCapacity",
        "Device",
        "ElasticQuota",
        "NodeMetric",
        "NodeResourceTopology",
        "PodGroup",
        "Reservation",
    ]
    required = sorted(r.kind.kind for r in first if not r.optional)
    served = ["CSIDriver", "CSINode", "ConfigMap", "Namespace", "Node", "PersistentVolume"]
    served.append("PersistentVolumeClaim")
    served += [
        "PodDisruptionBudget",
        "PriorityClass",
        "ReplicaSet",
        "ReplicationController",
        "Service",
        "StatefulSet",
        "StorageClass",
    ]
    assert required == served
    assert pods.kind.kind == "Pod"
    first, _ = reflectors_for(client, object(), SchedulerMetrics(), kinds=())  # type: ignore[arg-type]
    assert not any(r.optional for r in first)
