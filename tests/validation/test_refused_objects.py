"""Issue 24, items 5 and 6: objects the API server refuses are refused here too, named with the
field, through ``simulate``: PDBs, PriorityClasses, a pod naming no class, PVs, PVCs,
StorageClasses, CSINodes. Malformed ones (the API server could never hold them) make the file
unusable (exit 2 naming document and field); well-formed ones the scheduler refuses are set aside
with a warning, and what uses them is not scheduled."""

from __future__ import annotations

from typing import Any

import pytest

from koordsched.backends.sim.loader import InputError
from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, simulate
from tests.builders import pod_manifest, yaml_docs
from tests.scenario.helpers import WriteYaml

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
}


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return pod_manifest(name, "1", None, uid="", labels={"app": "a"}, **spec)


def _write(write_yaml: WriteYaml, *docs: dict[str, Any]) -> Any:
    return write_yaml(yaml_docs(*docs))


def _pdb(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "pdb", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, **spec},
    }


PERCENT = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', "
    "regex used for validation is '[0-9]+%')"
)


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        (
            {"minAvailable": 1, "maxUnavailable": 1},
            "spec.minAvailable: Invalid value: 1: minAvailable and maxUnavailable cannot be both set",
        ),
        ({"minAvailable": -1}, "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"),
        (
            {"maxUnavailable": "150%"},
            'spec.maxUnavailable: Invalid value: "150%": must not be greater than 100%',
        ),
        ({"minAvailable": "half"}, f'spec.minAvailable: Invalid value: "half": {PERCENT}'),
        ({"minAvailable": "-5%"}, f'spec.minAvailable: Invalid value: "-5%": {PERCENT}'),
    ],
)
def test_pdb_the_api_server_refuses_names_the_document_and_field(
    write_yaml: WriteYaml, spec: dict[str, Any], error: str
) -> None:
    with pytest.raises(InputError) as exc:
        simulate([_write(write_yaml, NODE, _pdb(**spec), _pod("a"))])
    assert "PodDisruptionBudget default/pdb" in str(exc.value) and error in str(exc.value), str(exc.value)


@pytest.mark.parametrize("spec", [{"minAvailable": 0}, {"minAvailable": "100%"}, {"maxUnavailable": "0%"}])
def test_pdb_the_api_server_accepts_is_read(write_yaml: WriteYaml, spec: dict[str, Any]) -> None:
    result = simulate([_write(write_yaml, NODE, _pdb(**spec), _pod("a"))])
    assert result.pod("default/a").status == SCHEDULED


def _pc(name: str, value: int, **more: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **more,
    }


@pytest.mark.parametrize(
    ("classes", "refused", "error"),
    [
        (
            [_pc("huge", 1_000_000_001)],
            "huge",
            "value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
        ),
        (
            [_pc("system-mine", 5)],
            "system-mine",
            "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system "
            "use only. error: system-mine is not a known system priority class",
        ),
        (
            [_pc("odd", 5, preemptionPolicy="Sometimes")],
            "odd",
            'preemptionPolicy: Unsupported value: "Sometimes": supported values: "Never", '
            '"PreemptLowerPriority"',
        ),
        (
            [_pc("a-default", 5, globalDefault=True), _pc("b-default", 7, globalDefault=True)],
            "b-default",
            'priorityclasses.scheduling.k8s.io "b-default" is forbidden: PriorityClass a-default is already '
            "marked as default. Only one default can exist",
        ),
    ],
)
def test_priority_class_the_api_server_refuses_is_ignored_with_a_warning(
    write_yaml: WriteYaml, classes: list[dict[str, Any]], refused: str, error: str
) -> None:
    pods = [_pod("named", priorityClassName=refused), _pod("plain")]
    result = simulate([_write(write_yaml, NODE, *classes, *pods)])
    (warning,) = [w for w in result.warnings if f"PriorityClass {refused}" in w]
    assert error in warning and warning.endswith("ignored: pods naming it fail as if it did not exist")
    named = result.pod("default/named")
    assert (named.status, named.message) == (UNSCHEDULABLE, f"no PriorityClass with name {refused} was found")
    assert result.pod("default/plain").status == SCHEDULED


def test_system_classes_are_read(write_yaml: WriteYaml) -> None:
    classes = [_pc("system-node-critical", 2_000_001_000), _pc("system-cluster-critical", 2_000_000_000)]
    pods = [_pod("a", priorityClassName="system-node-critical")]
    result = simulate([_write(write_yaml, NODE, *classes, *pods)])
    assert result.pod("default/a").status == SCHEDULED
    assert not [w for w in result.warnings if "PriorityClass" in w]


def test_pod_naming_no_class_is_not_scheduled_and_says_so(write_yaml: WriteYaml) -> None:
    result = simulate([_write(write_yaml, NODE, _pod("a", priorityClassName="ghost"))])
    pod = result.pod("default/a")
    assert (pod.status, pod.message) == (UNSCHEDULABLE, "no PriorityClass with name ghost was found")
    (event,) = result.port.events_for("default/a")
    assert (event.type, event.reason, event.message) == ("Warning", "FailedScheduling", pod.message)


def _pv(**spec: Any) -> dict[str, Any]:
    body = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "sc",
        **spec,
    }
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"}, "spec": body}


def _pvc(**spec: Any) -> dict[str, Any]:
    body = {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "sc",
        "resources": {"requests": {"storage": "1Gi"}},
        **spec,
    }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "claim", "namespace": "default"},
        "spec": body,
    }


def _sc(provisioner: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "sc"},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def _csi_node(count: int) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": "n1"},
        "spec": {"drivers": [{"name": "d", "nodeID": "n1", "allocatable": {"count": count}}]},
    }


USER = _pod("user", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "claim"}}])


@pytest.mark.parametrize(
    ("objects", "named", "error"),
    [
        ([_sc("d"), _pv(accessModes=[]), _pvc()], "PersistentVolume pv", "spec.accessModes: Required value"),
        (
            [_sc("d"), _pvc(resources={"requests": {"storage": "-100m"}})],
            "PersistentVolumeClaim default/claim",
            'spec.resources.requests[storage]: Invalid value: "-100m": must be greater than or equal to 0',
        ),
        ([_sc(""), _pvc()], "StorageClass sc", "provisioner: Required value"),
        (
            [_sc("d"), _pvc(), _csi_node(2**31)],
            "CSINode n1",
            "spec.drivers[0].allocatable.count: Invalid value: 2147483648: must fit in int32",
        ),
    ],
)
def test_storage_objects_the_api_server_refuses_are_named(
    write_yaml: WriteYaml, objects: list[dict[str, Any]], named: str, error: str
) -> None:
    result = simulate([_write(write_yaml, NODE, *objects, USER, _pod("plain"))])
    (warning,) = [w for w in result.warnings if f"({named})" in w]
    assert error in warning, warning
    assert result.pod("default/plain").status == SCHEDULED
