"""ElasticQuota (``scheduling.sigs.k8s.io/v1alpha1``, namespaced) and Koordinator's quota labels.

The CR carries ``spec.min``, ``spec.max`` and ``status.used`` (spec 3.4); Koordinator adds the
tree and the sharing rules as labels and annotations on it (spec 2.6). :func:`parse_elastic_quota`
reads all of it once per object version into a :class:`QuotaSpec` of canonical integers (CPU in
millicores, everything else in base units), raising ``ValueError`` that names the object, the
field and the value for anything it cannot use: ElasticQuota's reader refuses that quota (and
the pods that would be charged to it), nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from koordsched.api.annotations import decode_json
from koordsched.api.core import ObjectMeta, ResourceList
from koordsched.api.field_errors import Refused, invalid, invalid_object
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import resource_list

__all__ = [
    "ANNOTATION_NAMESPACES",
    "ANNOTATION_NON_PREEMPTIBLE_USED",
    "ANNOTATION_REQUEST",
    "ANNOTATION_RUNTIME",
    "ANNOTATION_SHARED_WEIGHT",
    "DEFAULT_QUOTA_NAME",
    "LABEL_ALLOW_LENT_RESOURCE",
    "LABEL_IS_PARENT",
    "LABEL_PARENT",
    "LABEL_POD_PREEMPTIBLE",
    "LABEL_QUOTA_NAME",
    "LABEL_TREE_ID",
    "ROOT_QUOTA_NAME",
    "SYSTEM_QUOTA_NAME",
    "ElasticQuota",
    "QuotaSpec",
    "parse_elastic_quota",
]

_PREFIX = "quota.scheduling.koordinator.sh"

#: On pods: the quota the pod is charged to, and ``"false"`` for a pod that must fit under min.
LABEL_QUOTA_NAME = f"{_PREFIX}/name"
LABEL_POD_PREEMPTIBLE = f"{_PREFIX}/preemptible"
#: On quotas (spec 2.6).
LABEL_IS_PARENT = f"{_PREFIX}/is-parent"
LABEL_PARENT = f"{_PREFIX}/parent"
LABEL_ALLOW_LENT_RESOURCE = f"{_PREFIX}/allow-lent-resource"
LABEL_TREE_ID = f"{_PREFIX}/tree-id"
ANNOTATION_SHARED_WEIGHT = f"{_PREFIX}/shared-weight"
ANNOTATION_NAMESPACES = f"{_PREFIX}/namespaces"
#: Written back by the scheduler (JSON ResourceLists), as Koordinator's status controller does.
ANNOTATION_RUNTIME = f"{_PREFIX}/runtime"
ANNOTATION_REQUEST = f"{_PREFIX}/request"
ANNOTATION_NON_PREEMPTIBLE_USED = f"{_PREFIX}/non-preemptible-used"

ROOT_QUOTA_NAME = "koordinator-root-quota"
SYSTEM_QUOTA_NAME = "koordinator-system-quota"
DEFAULT_QUOTA_NAME = "koordinator-default-quota"


class _Base(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


class ElasticQuotaSpec(_Base):
    min: ResourceList = {}
    max: ResourceList = {}


class ElasticQuotaStatus(_Base):
    used: ResourceList = {}


class ElasticQuota(_Base):
    api_version: str = "scheduling.sigs.k8s.io/v1alpha1"
    kind: str = "ElasticQuota"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ElasticQuotaSpec = msgspec.field(default_factory=ElasticQuotaSpec)
    status: ElasticQuotaStatus = msgspec.field(default_factory=ElasticQuotaStatus)


@dataclass(frozen=True)
class QuotaSpec:
    """What the scheduler reads of one ElasticQuota, in canonical integers."""

    name: str
    namespace: str
    #: The parent quota's name; the root's children have ``ROOT_QUOTA_NAME``.
    parent: str
    is_parent: bool
    allow_lent: bool
    tree_id: str
    min: dict[str, int] = field(default_factory=dict)
    max: dict[str, int] = field(default_factory=dict)
    #: Defaults to ``max`` (spec 2.6).
    shared_weight: dict[str, int] = field(default_factory=dict)
    namespaces: tuple[str, ...] = ()


def _amounts(
    path: str, rl: ResourceList, errors: list[str], malformed: list[str] | None = None
) -> dict[str, int]:
    try:
        out = resource_list(rl)
    except QuantityError as err:
        message = invalid(path, str(err), "must be a valid resource quantity")
        errors.append(message)
        if malformed is not None:
            malformed.append(message)
        return {}
    for name, amount in out.items():
        if amount < 0:
            errors.append(invalid(f"{path}[{name}]", str(rl[name]), "must be greater than or equal to 0"))
    return out


def _bool_label(labels: dict[str, str], key: str, default: bool, errors: list[str]) -> bool:
    raw = labels.get(key)
    if raw is None or raw == "":
        return default
    if raw in ("true", "false"):
        return raw == "true"
    errors.append(invalid(f"metadata.labels[{key}]", raw, 'must be "true" or "false"'))
    return default


def parse_elastic_quota(eq: ElasticQuota) -> QuotaSpec:
    """The quota as the scheduler uses it; ``ValueError`` naming the quota and field otherwise:
    :class:`~koordsched.api.field_errors.Refused` when the API server would have stored it.

    Refused: quantities that cannot be read (``ValueError``: the CRD's schema refuses them) or are
    negative, ``min`` above ``max`` in a
    resource ``max`` names (Koordinator's webhook refuses it), a shared weight or namespaces
    annotation that is not the JSON it must be, boolean labels that are neither ``true`` nor
    ``false``, and a quota that names itself as its parent.
    """
    meta = eq.metadata
    errors: list[str] = []
    #: What the API server itself refuses (the CRD's quantity pattern): the object is malformed.
    malformed: list[str] = []
    mins = _amounts("spec.min", eq.spec.min, errors, malformed)
    maxs = _amounts("spec.max", eq.spec.max, errors, malformed)
    for name, amount in mins.items():
        if name in maxs and amount > maxs[name]:
            errors.append(
                invalid(
                    f"spec.min[{name}]",
                    str(eq.spec.min[name]),
                    f"must be less than or equal to spec.max[{name}]",
                )
            )
    weights = dict(maxs)
    raw_weight = meta.annotations.get(ANNOTATION_SHARED_WEIGHT, "")
    if raw_weight:
        path = f"metadata.annotations[{ANNOTATION_SHARED_WEIGHT}]"
        try:
            decoded = decode_json(raw_weight, dict[str, str | int | float])
        except msgspec.DecodeError as err:
            errors.append(invalid(path, raw_weight, f"must be a JSON resource list: {err}"))
        else:
            weights = _amounts(path, decoded, errors)
    namespaces: tuple[str, ...] = ()
    raw_ns = meta.annotations.get(ANNOTATION_NAMESPACES, "")
    if raw_ns:
        try:
            namespaces = tuple(decode_json(raw_ns, list[str]))
        except msgspec.DecodeError as err:
            errors.append(
                invalid(
                    f"metadata.annotations[{ANNOTATION_NAMESPACES}]",
                    raw_ns,
                    f"must be a JSON array of namespace names: {err}",
                )
            )
    parent = meta.labels.get(LABEL_PARENT, "") or ROOT_QUOTA_NAME
    if parent == meta.name:
        errors.append(invalid(f"metadata.labels[{LABEL_PARENT}]", parent, "a quota cannot be its own parent"))
    is_parent = _bool_label(meta.labels, LABEL_IS_PARENT, False, errors)
    allow_lent = _bool_label(meta.labels, LABEL_ALLOW_LENT_RESOURCE, True, errors)
    if errors:
        message = invalid_object("ElasticQuota", f"{meta.namespace}/{meta.name}", errors)
        # A well-formed object the scheduler refuses is Refused (the simulator warns and goes on).
        raise ValueError(message) if malformed else Refused(message)
    return QuotaSpec(
        name=meta.name,
        namespace=meta.namespace,
        parent=parent,
        is_parent=is_parent,
        allow_lent=allow_lent,
        tree_id=meta.labels.get(LABEL_TREE_ID, ""),
        min=mins,
        max=maxs,
        shared_weight=weights,
        namespaces=namespaces,
    )
