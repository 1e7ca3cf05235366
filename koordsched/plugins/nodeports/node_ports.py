"""NodePorts: a pod's host ports must not collide with those already taken on the node.

Pods with host ports are rare, so the filter walks the candidate rows in Python but
looks only at nodes that have any port in use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    BatchFilterPlugin,
    ClusterEventWithHint,
    Codes,
    EnqueueExtensions,
    Handle,
    PreFilterExtensions,
    PreFilterPlugin,
    Rows,
)
from koordsched.framework.snapshot import pod_host_ports
from koordsched.framework.status import SKIP, SUCCESS, Status
from koordsched.framework.types import ASSIGNED_POD_DELETE, NODE_ADD, NODE_UPDATE, PodInfo, PreFilterResult

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
_REJECTED = Status.unschedulable(ERR_REASON)
_STATE_KEY = "PreFilterNodePorts"

HostPorts = list[tuple[str, str, int]]


class NodePorts:
    name = "NodePorts"

    def __init__(self, args: Any, handle: Handle) -> None:
        self._handle = handle

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        """Skip, as upstream, only for a pod that declares no container port at all.

        Ports without a hostPort are kept in upstream's state but can never conflict, so
        only the host ports are stored.
        """
        if not any(c.ports for c in pod.pod.spec.containers):
            return None, SKIP
        state.write(_STATE_KEY, pod_host_ports(pod))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        ports: HostPorts | None = state.read_optional(_STATE_KEY, list)
        if ports is None:
            ports = pod_host_ports(pod)
        if not ports:
            return np.zeros(len(rows), dtype=np.int64)
        infos = self._handle.snapshot.infos
        return np.fromiter(
            (
                1 if (info := infos[row]).used_ports and info.port_conflicts(ports) else 0
                for row in rows.tolist()
            ),
            dtype=np.int64,
            count=len(rows),
        )

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        return _REJECTED

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ASSIGNED_POD_DELETE),
            ClusterEventWithHint(NODE_ADD),
            ClusterEventWithHint(NODE_UPDATE),
        ]


if TYPE_CHECKING:
    # The extension points NodePorts implements; mypy checks each line, nothing runs.
    _pre_filter: type[PreFilterPlugin] = NodePorts
    _filter: type[BatchFilterPlugin] = NodePorts
    _enqueue_extensions: type[EnqueueExtensions] = NodePorts
