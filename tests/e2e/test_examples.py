"""Every example is valid for a real API server: each document of ``examples/*.yaml`` is created
with a server-side dry run (``dryRun=All``), so it goes through decoding, defaulting, admission and
validation, and nothing is stored.

Before an example's objects, what they need but the file does not hold is created for real: the
CRDs of ``deploy/crds/``, the namespaces its objects name, and the PriorityClasses its pods name
(the file's own, else those of ``deploy/priorityclasses.yaml``; the Priority admission plugin
refuses a pod whose class does not exist). The PriorityClasses go again after each example.

Accepted is not enough: kube-apiserver 1.20 drops fields it does not know without a word (and
prunes those a CRD's schema does not declare), so a typo would pass. What the server returns is
compared with what was sent: every field sent must come back with the same value (quantities
compared as quantities: ``cpu: 64`` comes back as ``"64"``). A field dropped that is newer than
1.20 (``schedulingGates``, say) is a warning, not a failure: a newer API server keeps it. A zero
value left out (an empty map, ``false``: Go's omitempty) is no difference, so a misspelt field
set to one goes unnoticed; it would do nothing anyway.

``status`` is not taken on create where the resource has a status subresource, so a document with
a status is also created for real, its status written with a dry-run update of the subresource
and compared the same way, and the object deleted.

This module runs its own control plane, so that the CRDs stay out of the shared one of the other
tests (as ``test_crd_smoke.py`` does).
"""

from __future__ import annotations

import copy
import re
import warnings
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordsched.api.quantity import parse_quantity
from tests.e2e.apiserver import REPO_ROOT, KubeEnv
from tests.e2e.fixtures import control_plane
from tests.e2e.helpers import Api, ApiError
from tests.e2e.test_crd_smoke import install_crds

pytestmark = pytest.mark.e2e

EXAMPLES = sorted((REPO_ROOT / "examples").glob("*.yaml"))
PRIORITY_CLASSES = REPO_ROOT / "deploy" / "priorityclasses.yaml"
PRIORITY_CLASS_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"
DRY_RUN = {"dryRun": "All"}

#: Metadata the server sets on create whatever the client sent (a simulated cluster's examples set
#: some of them, creationTimestamp for queue order, uid for claim references).
SERVER_METADATA = frozenset(
    {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"}
)

#: Fields the scheduler reads that kube-apiserver 1.20 does not know (so drops), with the
#: Kubernetes release that added them (``[]``: any item of a list).
_AFFINITY_TERMS = [
    f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution[]"
    for kind in ("podAffinity", "podAntiAffinity")
] + [
    f"spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution[].podAffinityTerm"
    for kind in ("podAffinity", "podAntiAffinity")
]
NEWER_FIELDS: dict[str, dict[str, str]] = {
    "Pod": {
        "spec.schedulingGates": "1.26",
        "spec.topologySpreadConstraints[].minDomains": "1.24",
        "spec.topologySpreadConstraints[].nodeAffinityPolicy": "1.25",
        "spec.topologySpreadConstraints[].nodeTaintsPolicy": "1.25",
        "spec.topologySpreadConstraints[].matchLabelKeys": "1.25",
        **{f"{term}.namespaceSelector": "1.21" for term in _AFFINITY_TERMS},
        **{f"{term}.matchLabelKeys": "1.29" for term in _AFFINITY_TERMS},
        **{f"{term}.mismatchLabelKeys": "1.29" for term in _AFFINITY_TERMS},
    },
}


# --- comparing what was sent with what came back -----------------------------------------------


@dataclass(frozen=True)
class Difference:
    path: str  # e.g. spec.containers[0].image
    sent: object
    returned: object  # MISSING when the server dropped the field

    @property
    def dropped(self) -> bool:
        return self.returned is MISSING

    def describe(self) -> str:
        if self.dropped:
            return f"{self.path}: dropped by the server (a field this API server does not know)"
        return f"{self.path}: sent {self.sent!r}, the server returned {self.returned!r}"


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


def _same_scalar(sent: object, returned: object) -> bool:
    if sent == returned or (not isinstance(sent, bool) and str(sent) == str(returned)):
        return True
    # A quantity comes back in canonical form: "1000m" as "1", 0.5 as "500m".
    try:
        return parse_quantity(str(sent)) == parse_quantity(str(returned))
    except ValueError:
        return False


def differences(sent: object, returned: object, path: str = "") -> list[Difference]:
    """What of ``sent`` did not come back unchanged in ``returned`` (fields the server added, its
    defaults, are not differences)."""
    if isinstance(sent, dict):
        if not isinstance(returned, dict):
            return [Difference(path, sent, returned)]
        out: list[Difference] = []
        for key, value in sent.items():
            sub = f"{path}.{key}" if path else str(key)
            if key not in returned:
                # A zero value the server leaves out (Go's omitempty) did not get lost.
                if value not in ({}, [], None, "", False):
                    out.append(Difference(sub, value, MISSING))
            else:
                out.extend(differences(value, returned[key], sub))
        return out
    if isinstance(sent, list):
        # Admission may append (DefaultTolerationSeconds adds two tolerations); nothing sent may go.
        if not isinstance(returned, list) or len(returned) < len(sent):
            return [Difference(path, sent, returned)]
        out = []
        for i, (s, r) in enumerate(zip(sent, returned, strict=False)):
            out.extend(differences(s, r, f"{path}[{i}]"))
        return out
    return [] if _same_scalar(sent, returned) else [Difference(path, sent, returned)]


def newer_field(kind: str, diff: Difference) -> str | None:
    """The release that added the dropped field ``diff``, if it is one newer than 1.20."""
    if not diff.dropped:
        return None
    pattern = re.sub(r"\[\d+\]", "[]", diff.path)
    return NEWER_FIELDS.get(kind, {}).get(pattern)


def without_status(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != "status"}


def client_content(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without the metadata the server sets itself."""
    out = copy.deepcopy(obj)
    meta = out.get("metadata") or {}
    for key in SERVER_METADATA:
        meta.pop(key, None)
    return out


# --- the API's resources --------------------------------------------------------------------------


@dataclass(frozen=True)
class Resource:
    collection: str  # /api/v1/pods, or /api/v1/namespaces/{namespace}/pods when namespaced
    namespaced: bool
    status_subresource: bool

    def path(self, namespace: str) -> str:
        return self.collection.format(namespace=namespace)


async def discover(api: Api, api_version: str) -> dict[str, Resource]:
    """kind -> Resource for one group version, from the server's discovery documents."""
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    listing = await api.get(base)
    names = {r["name"] for r in listing["resources"]}
    out: dict[str, Resource] = {}
    for r in listing["resources"]:
        if "/" in r["name"]:
            continue
        prefix = f"{base}/namespaces/{{namespace}}" if r["namespaced"] else base
        out[r["kind"]] = Resource(f"{prefix}/{r['name']}", r["namespaced"], f"{r['name']}/status" in names)
    return out


# --- the examples ---------------------------------------------------------------------------------


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def name_of(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{doc.get('kind')} {ns + '/' if ns else ''}{meta.get('name')}"


def priority_classes_needed(docs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The PriorityClasses the example's pods name: the example's own, else the deployed ones."""
    own = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "PriorityClass"}
    deployed = {
        d["metadata"]["name"]: d for d in documents(PRIORITY_CLASSES) if d.get("kind") == "PriorityClass"
    }
    wanted = {
        name
        for d in docs
        if d.get("kind") == "Pod" and (name := (d.get("spec") or {}).get("priorityClassName"))
    }
    missing = wanted - own.keys() - deployed.keys()
    assert not missing, (
        f"pods name PriorityClasses neither the example nor {PRIORITY_CLASSES} holds: {missing}"
    )
    return [*own.values(), *(deployed[n] for n in sorted(wanted - own.keys()))]


@dataclass
class Report:
    errors: list[str]
    newer: list[str]

    def check(self, doc: dict[str, Any], sent: dict[str, Any], returned: dict[str, Any], what: str) -> None:
        for diff in differences(client_content(sent), returned):
            release = newer_field(str(doc.get("kind")), diff)
            if release is not None:
                self.newer.append(f"{name_of(doc)}: {diff.path} (Kubernetes {release}) dropped on {what}")
            else:
                self.errors.append(f"{name_of(doc)}: {what}: {diff.describe()}")


async def create_all(api: Api, docs: Sequence[dict[str, Any]], report: Report) -> None:
    resources: dict[str, dict[str, Resource]] = {}
    for doc in docs:
        api_version, kind = str(doc.get("apiVersion")), str(doc.get("kind"))
        if api_version not in resources:
            try:
                resources[api_version] = await discover(api, api_version)
            except ApiError as err:
                report.errors.append(f"{name_of(doc)}: apiVersion {api_version} is not served: {err.message}")
                resources[api_version] = {}
        resource = resources[api_version].get(kind)
        if resource is None:
            report.errors.append(f"{name_of(doc)}: no resource of kind {kind} in {api_version}")
            continue
        namespace = (doc.get("metadata") or {}).get("namespace") or "default"
        collection = resource.path(namespace)
        try:
            created = await api.request("POST", collection, doc, params=DRY_RUN)
        except ApiError as err:
            report.errors.append(f"{name_of(doc)}: refused: {err.status}: {err.message}")
            continue
        if not resource.status_subresource or not doc.get("status"):
            report.check(doc, doc, created, "create")
            continue
        report.check(doc, without_status(doc), created, "create")
        await check_status(api, doc, collection, report)


async def check_status(api: Api, doc: dict[str, Any], collection: str, report: Report) -> None:
    """Write ``doc``'s status through its subresource (dry run) on a real copy of the object."""
    obj_path = f"{collection}/{doc['metadata']['name']}"
    await api.delete(obj_path)  # a leftover of an interrupted run
    created = await api.post(collection, without_status(doc))
    try:
        updated = await api.request(
            "PUT", f"{obj_path}/status", {**created, "status": doc["status"]}, params=DRY_RUN
        )
        report.check(doc, {"status": doc["status"]}, updated, "status update")
    except ApiError as err:
        report.errors.append(f"{name_of(doc)}: status refused: {err.status}: {err.message}")
    finally:
        await api.delete(obj_path)


# --- the tests ------------------------------------------------------------------------------------


kube_env = control_plane()


@pytest.fixture
async def api(kube_env: KubeEnv) -> AsyncIterator[Api]:
    async with Api(kube_env) as a:
        yield a


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
async def test_every_document_of_the_example_is_accepted_as_written(api: Api, example: Path) -> None:
    docs = documents(example)
    assert docs, f"{example} holds no objects"
    await install_crds(api)
    for ns in sorted({ns for d in docs if (ns := (d.get("metadata") or {}).get("namespace"))}):
        await api.ensure_namespace(ns)

    report = Report(errors=[], newer=[])
    classes = priority_classes_needed(docs)
    try:
        for pc in classes:  # for real: the pods' admission looks them up
            await api.delete(f"{PRIORITY_CLASS_PATH}/{pc['metadata']['name']}")
            try:
                report.check(pc, pc, await api.post(PRIORITY_CLASS_PATH, pc), "create")
            except ApiError as err:
                report.errors.append(f"{name_of(pc)}: refused: {err.status}: {err.message}")
        await create_all(api, [d for d in docs if d.get("kind") != "PriorityClass"], report)
    finally:
        for pc in classes:
            await api.delete(f"{PRIORITY_CLASS_PATH}/{pc['metadata']['name']}")

    for line in report.newer:
        warnings.warn(f"{example.name}: {line}: kube-apiserver 1.20 does not know it", stacklevel=1)
    assert not report.errors, f"{example.name}:\n" + "\n".join(report.errors)


# Without the API server: the comparison itself.

SENT_CONTAINER = {"name": "c", "image": "i", "resources": {"requests": {"cpu": 0.5, "memory": "1024Mi"}}}
SENT_POD = {
    "metadata": {"name": "p", "uid": "u-1"},
    "spec": {"containers": [SENT_CONTAINER], "schedulingGates": [{"name": "g"}], "nodeSelector": {}},
}
# cpu 0.5 comes back as "500m", 1024Mi as "1Gi"
CANONICAL_RESOURCES = {"requests": {"cpu": "500m", "memory": "1Gi"}}
RETURNED_CONTAINER = {
    "name": "c",
    "image": "i",
    "imagePullPolicy": "Always",
    "resources": CANONICAL_RESOURCES,
}


@pytest.mark.parametrize(
    ("returned_spec", "expected"),
    [
        # defaults added, an empty map left out: no difference
        (
            {
                "containers": [RETURNED_CONTAINER],
                "schedulingGates": [{"name": "g"}],
                "restartPolicy": "Always",
            },
            [],
        ),
        # schedulingGates dropped: newer than 1.20, a warning
        ({"containers": [RETURNED_CONTAINER]}, [("spec.schedulingGates", True, "1.26")]),
        # a field dropped (a typo, say) and a changed value: errors
        (
            {
                "containers": [{"name": "c", "image": "j", "resources": {"limits": {"cpu": "500m"}}}],
                "schedulingGates": [{"name": "g"}],
            },
            [
                ("spec.containers[0].image", False, None),
                ("spec.containers[0].resources.requests", True, None),
            ],
        ),
        # a list item lost: an error
        ({"containers": [], "schedulingGates": [{"name": "g"}]}, [("spec.containers", False, None)]),
    ],
)
def test_differences_tell_a_newer_field_from_a_lost_or_changed_one(
    returned_spec: dict[str, Any], expected: list[tuple[str, bool, str | None]]
) -> None:
    returned = {"metadata": {"name": "p", "uid": "server-uid", "namespace": "default"}, "spec": returned_spec}
    found = differences(client_content(SENT_POD), returned)
    assert [(d.path, d.dropped, newer_field("Pod", d)) for d in found] == expected
