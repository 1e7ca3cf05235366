"""The API server's defaulting that the scheduler relies on, for objects that never went through one.

A cluster's objects were defaulted when they were created; manifests handed to the simulator
were not. Only what a scheduling decision depends on is mirrored here (kube's
``SetDefaults_*`` functions of the core/v1 API):

* a container port without a protocol is TCP;
* a ``hostNetwork`` pod's container ports (init containers too) get ``hostPort =
  containerPort`` where no host port is given: the pod listens on the node's address, so two
  such pods with the same port cannot share a node (NodePorts sees the host port);
* a Namespace carries the label ``kubernetes.io/metadata.name`` with its name (what
  ``namespaceSelector`` terms usually select by).

Other defaults the scheduler needs are applied where the value is read, identically for both
backends: a request missing beside its limit takes the limit (``api.resources``), an empty
toleration operator is Equal (``api.taints``), a pod's priority comes from its class or the
global default class (``scheduler.podinfo``), ``schedulerName`` is ``default-scheduler``
(``api.core``).
"""

from __future__ import annotations

import msgspec

from koordsched.api.core import Container, ContainerPort, Pod
from koordsched.api.workloads import Namespace

TCP = "TCP"
#: The label the API server gives every Namespace (``NamespaceDefaultLabelName``, GA in 1.22).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def _port(port: ContainerPort, host_network: bool) -> ContainerPort:
    protocol = port.protocol or TCP
    host_port = port.container_port if host_network and port.host_port == 0 else port.host_port
    if protocol == port.protocol and host_port == port.host_port:
        return port
    return msgspec.structs.replace(port, protocol=protocol, host_port=host_port)


def _containers(containers: list[Container], host_network: bool) -> list[Container] | None:
    """The containers with their ports defaulted, or None when nothing changes."""
    changed = False
    out = []
    for c in containers:
        ports = [_port(p, host_network) for p in c.ports]
        if any(new is not old for new, old in zip(ports, c.ports, strict=True)):
            c = msgspec.structs.replace(c, ports=ports)
            changed = True
        out.append(c)
    return out if changed else None


def default_pod(pod: Pod) -> Pod:
    """``SetDefaults_Pod`` and ``SetDefaults_ContainerPort``, as far as scheduling reads them."""
    spec = pod.spec
    containers = _containers(spec.containers, spec.host_network)
    init = _containers(spec.init_containers, spec.host_network)
    if containers is None and init is None:
        return pod
    spec = msgspec.structs.replace(
        spec,
        containers=containers if containers is not None else spec.containers,
        init_containers=init if init is not None else spec.init_containers,
    )
    return msgspec.structs.replace(pod, spec=spec)


def default_namespace(ns: Namespace) -> Namespace:
    """``SetDefaults_Namespace``: the name label, set whatever the manifest said."""
    meta = ns.metadata
    if meta.labels.get(NAMESPACE_NAME_LABEL) == meta.name:
        return ns
    labels = {**meta.labels, NAMESPACE_NAME_LABEL: meta.name}
    return msgspec.structs.replace(ns, metadata=msgspec.structs.replace(meta, labels=labels))
