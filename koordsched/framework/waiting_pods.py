"""Pods held at Permit: allowed, rejected or timed out from other code paths (gangs, reservations)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

from koordsched.api.durations import format_duration
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import PodInfo


class WaitingPodImpl:
    """One pod waiting at Permit until every plugin that said Wait allows it.

    The verdict is a plain attribute, settled once; an asyncio future is created only
    when the binding task actually awaits, so the scheduling core stays usable without
    a running loop (the simulator drives time itself and may settle a wait by timeout).
    """

    def __init__(
        self,
        pod: PodInfo,
        node_name: str,
        deadlines: dict[str, float],
        timeouts: dict[str, float] | None = None,
    ) -> None:
        self.pod = pod
        self.node_name = node_name
        #: plugin -> absolute deadline (clock seconds)
        self.deadlines = dict(deadlines)
        #: plugin -> the timeout it asked for (seconds), for the rejection message
        self.timeouts = dict(timeouts or {})
        self.verdict: Status | None = None
        self._future: asyncio.Future[Status] | None = None
        self._on_settle: list[Callable[[WaitingPodImpl], None]] = []

    def pending_plugins(self) -> list[str]:
        return list(self.deadlines)

    @property
    def deadline(self) -> float:
        return min(self.deadlines.values()) if self.deadlines else float("inf")

    def allow(self, plugin: str) -> None:
        if self.verdict is not None:
            return
        self.deadlines.pop(plugin, None)
        if not self.deadlines:
            self._settle(SUCCESS)

    def reject(self, plugin: str, message: str) -> None:
        if self.verdict is None:
            self._settle(Status(Code.UNSCHEDULABLE, message, plugin=plugin))

    def expire(self, now: float) -> bool:
        """Reject if a plugin's deadline passed; True when that happened."""
        if self.verdict is not None:
            return False
        for plugin, deadline in self.deadlines.items():
            if deadline <= now:
                # kube-scheduler prints the timeout the plugin asked for, as a Go duration.
                waited = format_duration(self.timeouts.get(plugin, 0.0))
                self._settle(
                    Status(
                        Code.UNSCHEDULABLE,
                        f"rejected due to timeout after waiting {waited} at plugin {plugin}",
                        plugin=plugin,
                    )
                )
                return True
        return False

    def on_settle(self, fn: Callable[[WaitingPodImpl], None]) -> None:
        self._on_settle.append(fn)

    def _settle(self, status: Status) -> None:
        self.verdict = status
        if self._future is not None and not self._future.done():
            self._future.set_result(status)
        for fn in self._on_settle:
            fn(self)

    async def wait(self) -> Status:
        if self.verdict is not None:
            return self.verdict
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        return await self._future


class WaitingPods:
    def __init__(self) -> None:
        self._pods: dict[str, WaitingPodImpl] = {}

    def add(self, wp: WaitingPodImpl) -> None:
        self._pods[wp.pod.uid] = wp

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPodImpl | None:
        return self._pods.get(uid)

    def __iter__(self) -> Iterator[WaitingPodImpl]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)

    def next_deadline(self) -> float | None:
        pending = [wp.deadline for wp in self._pods.values() if wp.verdict is None]
        return min(pending) if pending else None

    def expire(self, now: float) -> int:
        return sum(1 for wp in list(self._pods.values()) if wp.expire(now))
