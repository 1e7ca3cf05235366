"""Issue 24's surfaces, fuzzed (bounded: a few dozen examples each, no deadline): PodGroups and
gang annotations, ElasticQuota trees, volumes, PDBs and PriorityClasses, DeschedulerConfiguration.

Each input is either refused as a whole, with a message naming the document and the field
(``InputError``, ``ConfigError``), or played to the end without a traceback; then no invariant is
broken (node capacity, a gang's min-available all or nothing, a quota's max, a PV claimed twice)
and every refused object is named with the field that refused it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordsched.backends.sim.deschedule import deschedule
from koordsched.backends.sim.loader import InputError
from koordsched.backends.sim.runner import SCHEDULED, SimResult, simulate
from koordsched.config.errors import ConfigError
from tests.builders import node_manifest, pod_manifest, yaml_docs

FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROOT = Path(__file__).resolve().parents[2]
GANG = "gang.scheduling.koordinator.sh/"
QUOTA = "quota.scheduling.koordinator.sh/"

#: Integers as written: Go's Atoi reads only the first few; Python's int() read them all.
NUMBERS = st.one_of(
    st.sampled_from(
        ["2", "0", "-1", " 2", "2 ", "\u0968", "2_0", "+2", "0x2", "", "two", "2147483648", "1e3"]
    ),
    st.integers(-3, 5).map(str),
    # BMP only: YAML has no escape for the surrogate pairs json.dumps writes for the rest.
    st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"]), max_size=4),
)
GROUPS = st.one_of(
    st.sampled_from(
        ['["default/g"]', "[]", '{"a": 1}', "[1, 2]", '["g"]', "default/g", "not json", '["a/b/c"]']
    ),
    st.lists(st.sampled_from(["default/g", "default/h", "x", "/", "a/"]), max_size=3).map(json.dumps),
)


def _write(docs: list[dict[str, Any]]) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(yaml_docs(*docs))
    return f.name


def _node(name: str = "n1", cpu: str = "4") -> dict[str, Any]:
    return node_manifest(name, cpu, "16Gi", 20, capacity=False)


def _pod(
    name: str,
    ns: str = "default",
    cpu: str = "1",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return pod_manifest(
        name, cpu, None, namespace=ns, uid="", labels=labels, annotations=annotations, **(spec or {})
    )


def _capacity_kept(result: SimResult) -> None:
    for node in result.nodes:
        assert node.pods <= node.max_pods, node
        for name, (requested, allocatable) in node.resources.items():
            assert requested <= allocatable, (node.name, name, requested, allocatable)


def _simulate(docs: list[dict[str, Any]]) -> SimResult | InputError:
    try:
        result = simulate([_write(docs)])
    except InputError as err:
        return err
    _capacity_kept(result)
    return result


# --- gangs --------------------------------------------------------------------------------------


@FUZZ
@given(
    min_member=st.integers(0, 4),
    groups=st.one_of(st.none(), GROUPS),
    total=st.one_of(st.none(), NUMBERS),
    member_min=NUMBERS,
)
def test_gangs(min_member: int, groups: str | None, total: str | None, member_min: str) -> None:
    notes = {k: v for k, v in ((GANG + "groups", groups), (GANG + "total-number", total)) if v is not None}
    pg = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default", "annotations": notes},
        "spec": {"minMember": min_member},
    }
    labelled = [_pod(f"p{i}", labels={"pod-group.scheduling.sigs.k8s.io": "g"}) for i in range(3)]
    annotated = [
        _pod(f"a{i}", annotations={GANG + "name": "h", GANG + "min-available": member_min, **notes})
        for i in range(3)
    ]
    result = _simulate([_node(), pg, *labelled, *annotated])
    assert isinstance(result, SimResult), result
    for gang in result.summary.gangs:
        if gang.min_member is not None and gang.mode == "Strict" and groups is None:
            # Never half bound (a gang of a group goes on alone once its group was satisfied, as
            # Koordinator's shared once-satisfied flag lets it).
            assert gang.bound == 0 or gang.bound >= gang.min_member, gang
        if gang.error:
            assert gang.error.startswith(("PodGroup default/g: annotation ", "pod default/a")), gang.error
            assert GANG in gang.error
    for pod in result.pods:
        if pod.status != SCHEDULED and "gang has not init" in pod.message:
            assert GANG in pod.message or "not found" in pod.message, pod.message


# --- elastic quota trees ------------------------------------------------------------------------

QUOTA_SPECS = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries(
        {},
        optional={
            "min": st.dictionaries(st.sampled_from(["cpu", "memory"]), st.sampled_from(["0", "1", "2", "3"])),
            "max": st.dictionaries(st.sampled_from(["cpu", "memory"]), st.sampled_from(["1", "2", "4", "8"])),
        },
    ),
)


@FUZZ
@given(parent=QUOTA_SPECS, children=st.lists(QUOTA_SPECS, min_size=1, max_size=3), pods=st.integers(1, 6))
def test_quota_trees(parent: dict[str, Any] | None, children: list[dict[str, Any] | None], pods: int) -> None:
    def quota(name: str, spec: dict[str, Any] | None, labels: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": name, "labels": labels},
            "spec": spec,
        }

    docs = [_node(cpu="16"), quota("parent", parent, {QUOTA + "is-parent": "true"})]
    docs += [quota(f"c{i}", s, {QUOTA + "parent": "parent"}) for i, s in enumerate(children)]
    docs += [_pod(f"p{i}", f"c{i % len(children)}") for i in range(pods)]
    result = _simulate(docs)
    if isinstance(result, InputError):
        assert "ElasticQuota" in str(result), result
        return
    for q in result.quotas:
        if q.refusal:
            assert q.refusal.startswith(f'ElasticQuota "{q.key}" is '), q.refusal
            continue
        for name, cap in q.max.items():
            assert q.used.get(name, 0) <= cap, (q.name, name, q.used, q.max)


# --- volumes, PDBs, PriorityClasses -------------------------------------------------------------


@FUZZ
@given(
    access=st.lists(st.sampled_from(["ReadWriteOnce", "ReadOnlyMany", "Bogus"]), max_size=2),
    request=st.sampled_from(["1Gi", "-100m", "0", "-1", "1e3", "5Gi"]),
    provisioner=st.sampled_from(["", "csi.example.com"]),
    count=st.sampled_from([0, 1, -1, 2**31, 2**31 - 1]),
    users=st.integers(1, 3),
)
def test_volumes(access: list[str], request: str, provisioner: str, count: int, users: int) -> None:
    sc = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "sc"},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv"},
        "spec": {"capacity": {"storage": "2Gi"}, "accessModes": access, "storageClassName": "sc"},
    }
    claims = [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"c{i}", "namespace": "default"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "sc",
                "resources": {"requests": {"storage": request}},
            },
        }
        for i in range(users)
    ]
    csi = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": "n1"},
        "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n1", "allocatable": {"count": count}}]},
    }
    pods = [
        _pod(f"u{i}", spec={"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": f"c{i}"}}]})
        for i in range(users)
    ]
    result = _simulate([_node(), sc, pv, *claims, csi, *pods])
    if isinstance(result, InputError):
        assert any(k in str(result) for k in ("PersistentVolume", "StorageClass", "CSINode")), result
        return
    bound = [v.pv for v in result.volumes if v.pv is not None]
    assert len(bound) == len(set(bound)), result.volumes  # no PV claimed twice
    for w in result.warnings:
        if " is invalid: " in w:
            assert any(
                f"({k} " in w
                for k in ("PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode")
            ), w


INT_OR_PERCENT = st.one_of(
    st.none(),
    st.integers(-2, 3),
    st.sampled_from(["0%", "50%", "100%", "150%", "-5%", "half", "", "5"]),
)


@FUZZ
@given(
    min_available=INT_OR_PERCENT,
    max_unavailable=INT_OR_PERCENT,
    value=st.sampled_from([0, 10, 1_000_000_000, 1_000_000_001, 2_000_000_000, 2**31]),
    name=st.sampled_from(["high", "system-node-critical", "system-custom"]),
    policy=st.sampled_from([None, "Never", "PreemptLowerPriority", "Sometimes"]),
    defaults=st.integers(0, 2),
)
def test_pdbs_and_priority_classes(
    min_available: Any, max_unavailable: Any, value: int, name: str, policy: str | None, defaults: int
) -> None:
    pdb_spec: dict[str, Any] = {"selector": {"matchLabels": {"app": "a"}}}
    if min_available is not None:
        pdb_spec["minAvailable"] = min_available
    if max_unavailable is not None:
        pdb_spec["maxUnavailable"] = max_unavailable
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "pdb", "namespace": "default"},
        "spec": pdb_spec,
    }
    pc: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
    }
    pc["value"] = value
    if policy is not None:
        pc["preemptionPolicy"] = policy
    extra = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": f"default-{i}"},
            "value": i,
            "globalDefault": True,
        }
        for i in range(defaults)
    ]
    pods = [_pod("named", labels={"app": "a"}, spec={"priorityClassName": name}), _pod("plain")]
    result = _simulate([_node(), pdb, pc, *extra, *pods])
    if isinstance(result, InputError):
        assert "PodDisruptionBudget default/pdb" in str(result) and "spec." in str(result), result
        return
    refused = [w for w in result.warnings if f"(PriorityClass {name})" in w]
    named = result.pod("default/named")
    if refused:
        assert " is invalid: " in refused[0] or " is forbidden: " in refused[0], refused
        assert named.message == f"no PriorityClass with name {name} was found", named
    else:
        assert named.status == SCHEDULED, (named, result.warnings)
    assert len([w for w in result.warnings if "Only one default can exist" in w]) == max(0, defaults - 1)


# --- DeschedulerConfiguration -------------------------------------------------------------------

THRESHOLD = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([float("nan"), float("inf"), -1.0, 0.0, 50.0, 100.0, 101.0]),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    low=THRESHOLD,
    high=THRESHOLD,
    abnormal=st.sampled_from([0, 1, 5, 1_000_000, 2**32 - 1, 2**32, -1]),
)
def test_descheduler_thresholds_and_rounds(low: float, high: float, abnormal: int) -> None:
    def yaml_float(v: float) -> str:
        if v != v:
            return ".nan"
        if v in (float("inf"), float("-inf")):
            return ".inf" if v > 0 else "-.inf"
        # YAML 1.1 reads a float only with a dot ("1e-09" is a string there): write one.
        mantissa, e, exponent = repr(v).partition("e")
        return (mantissa if "." in mantissa else mantissa + ".0") + e + exponent

    config = (
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"
        "profiles:\n- name: p\n  plugins:\n    balance:\n      enabled: [{name: LowNodeLoad}]\n"
        "  pluginConfig:\n  - name: LowNodeLoad\n    args:\n"
        f"      lowThresholds: {{cpu: {yaml_float(low)}}}\n"
        f"      highThresholds: {{cpu: {yaml_float(high)}}}\n"
        f"      anomalyCondition: {{consecutiveAbnormalities: {abnormal}}}\n"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(config)
    try:
        result = deschedule([ROOT / "examples" / "hot-node.yaml"], config_path=f.name)
    except ConfigError as err:
        assert "LowNodeLoadArgs." in str(err), err  # the field's path
        return
    assert result.rounds >= 1
