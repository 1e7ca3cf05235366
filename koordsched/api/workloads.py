"""The objects kube-scheduler's default plugins read besides pods and nodes.

InterPodAffinity resolves ``namespaceSelector`` against Namespaces' labels; PodTopologySpread's
system default constraints take their selector from the Services selecting a pod and from its
controller (ReplicaSet, StatefulSet, ReplicationController). Only the fields those read are
declared.
"""

from __future__ import annotations

import msgspec

from koordsched.api.core import LabelSelector, ObjectMeta


class _Base(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


class Namespace(_Base):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class ServiceSpec(_Base):
    #: A nil/empty map selects no pod (a Service without a selector).
    selector: dict[str, str] = {}


class Service(_Base):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ServiceSpec = msgspec.field(default_factory=ServiceSpec)


class SelectorSpec(_Base):
    """``spec.selector`` of a ReplicaSet or StatefulSet (a LabelSelector)."""

    selector: LabelSelector | None = None


class ReplicaSet(_Base):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: SelectorSpec = msgspec.field(default_factory=SelectorSpec)


class StatefulSet(_Base):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: SelectorSpec = msgspec.field(default_factory=SelectorSpec)


class ReplicationControllerSpec(_Base):
    #: A map, not a LabelSelector (the v1 API's older shape).
    selector: dict[str, str] = {}


class ReplicationController(_Base):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ReplicationControllerSpec = msgspec.field(default_factory=ReplicationControllerSpec)
