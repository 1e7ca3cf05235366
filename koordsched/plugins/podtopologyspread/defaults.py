"""The selector of a pod's default spread constraints: upstream's ``helper.DefaultSelector``.

The labels of every Service in the pod's namespace whose selector matches the pod, merged,
and then its controller's selector: a ReplicationController's (``v1``) merged in as labels,
a ReplicaSet's or StatefulSet's (``apps/v1``) requirements added. A pod that no Service
selects and that has no such controller gets an empty selector, and so no default
constraints. A controller that is not (yet) known, or whose selector cannot be parsed,
contributes nothing, as upstream's lister miss does.

Services are indexed by namespace and the index is rebuilt only when the Service store's
version moves; an answer is remembered per (namespace, controller, labels), which the pods of
one ReplicaSet share, for as long as none of the four stores moved. A pod with no controller
in a namespace without Services is answered from the index alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordsched.api.core import LabelSelector, LabelSelectorRequirement, OwnerReference, Pod
from koordsched.api.kinds import REPLICA_SETS, REPLICATION_CONTROLLERS, SERVICES, STATEFUL_SETS
from koordsched.api.selectors import OP_IN, SelectorError, validate_label_selector
from koordsched.api.workloads import ReplicaSet, ReplicationController, Service, StatefulSet
from koordsched.framework.interface import Handle
from koordsched.framework.objects import version_of
from koordsched.framework.types import PodInfo

#: (apiVersion, kind) of the controllers DefaultSelector follows.
_RC = ("v1", "ReplicationController")
_RS = ("apps/v1", "ReplicaSet")
_SS = ("apps/v1", "StatefulSet")


def controller_of(pod: Pod) -> OwnerReference | None:
    """``metav1.GetControllerOf``: the owner reference marked ``controller: true``."""
    for ref in pod.metadata.owner_references:
        if ref.controller:
            return ref
    return None


def _requirements(selector: LabelSelector | None) -> list[LabelSelectorRequirement]:
    """``LabelSelectorAsSelector(sel).Requirements()``: nothing for a nil, empty or invalid one."""
    if selector is None:
        return []
    try:
        validate_label_selector(selector)
    except SelectorError:
        return []
    reqs = [
        LabelSelectorRequirement(key=k, operator=OP_IN, values=[v]) for k, v in selector.match_labels.items()
    ]
    return reqs + list(selector.match_expressions)


#: Distinct (namespace, controller, labels) remembered; past this the memo starts over.
_MEMO_LIMIT = 4096

_Versions = tuple[int | None, int | None, int | None, int | None]


class DefaultSelectors:
    """Answers ``DefaultSelector`` per pod, remembering the answer per (namespace, controller,
    labels): the pods of one ReplicaSet share it, and it holds while no Service or controller
    store changed."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._services_version: int | None = None
        #: namespace -> the non-empty selectors of its Services.
        self._services: dict[str, list[dict[str, str]]] = {}
        self._memo: dict[
            tuple[str, str, str, tuple[tuple[str, str], ...]], tuple[_Versions, LabelSelector | None]
        ] = {}

    def _service_selectors(self, services: Mapping[str, Service], namespace: str) -> list[dict[str, str]]:
        version = version_of(services)
        if version is None or version != self._services_version:
            index: dict[str, list[dict[str, str]]] = {}
            for key, svc in services.items():
                if svc.spec.selector:  # a Service without a selector selects no pod
                    ns = svc.metadata.namespace or key.partition("/")[0]
                    index.setdefault(ns, []).append(svc.spec.selector)
            self._services = index
            self._services_version = version
        return self._services.get(namespace, [])

    def selector(self, pod: PodInfo) -> LabelSelector | None:
        """The pod's default selector; None when it is empty (no default constraints then)."""
        h = self._handle
        meta = pod.pod.metadata
        services = h.objects(SERVICES)
        owner = controller_of(pod.pod)
        if owner is None and not self._service_selectors(services, meta.namespace):
            return None  # the usual pod without a Service: nothing to merge, nothing to remember
        rcs = h.objects(REPLICATION_CONTROLLERS)
        rss = h.objects(REPLICA_SETS)
        sss = h.objects(STATEFUL_SETS)
        versions = (version_of(services), version_of(rcs), version_of(rss), version_of(sss))
        key = (
            meta.namespace,
            "" if owner is None else f"{owner.api_version}/{owner.kind}",
            "" if owner is None else owner.name,
            tuple(sorted(meta.labels.items())),
        )
        known = self._memo.get(key)
        if known is not None and known[0] == versions and None not in versions:
            return known[1]
        result = self._compute(pod.pod, owner, services, rcs, rss, sss)
        if len(self._memo) >= _MEMO_LIMIT:
            self._memo.clear()
        self._memo[key] = (versions, result)
        return result

    def _compute(
        self,
        pod: Pod,
        owner: OwnerReference | None,
        services: Mapping[str, Service],
        rcs: Mapping[str, ReplicationController],
        rss: Mapping[str, ReplicaSet],
        sss: Mapping[str, StatefulSet],
    ) -> LabelSelector | None:
        meta = pod.metadata
        labels = meta.labels
        merged: dict[str, str] = {}
        for sel in self._service_selectors(services, meta.namespace):
            if all(labels.get(k) == v for k, v in sel.items()):
                merged.update(sel)
        extra: list[LabelSelectorRequirement] = []
        if owner is not None:
            which = (owner.api_version, owner.kind)
            key = f"{meta.namespace}/{owner.name}"
            if which == _RC:
                rc = rcs.get(key)
                if rc is not None:
                    merged.update(rc.spec.selector)
            elif which in (_RS, _SS):
                store: Mapping[str, Any] = rss if which == _RS else sss
                found = store.get(key)
                if found is not None:
                    extra = _requirements(found.spec.selector)
        if not merged and not extra:
            return None
        return LabelSelector(match_labels=merged, match_expressions=extra)
