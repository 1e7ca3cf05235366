"""The node lock Cambricon's and MetaX's device plugins expect the scheduler to take (C.5).

The lock is a Node annotation, ``<RFC3339 time>,<pod namespace>,<pod name>``, that the vendor's
device plugin removes once it has allocated the pod's devices. It is taken under an in-process
mutex per node (two binding cycles of this scheduler never race on one node), from the Node as
the API server has it now; a lock already there is taken over when it is older than five
minutes or its pod is gone, else PreBind fails and the pod is retried. The reads and the one
patch go through the output port (:class:`NodeLockWriter`), so the plugin does no I/O itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Final, Protocol, runtime_checkable

#: A lock older than this (seconds) is taken over, as HAMi's ``nodelock`` does.
LOCK_EXPIRY_S: Final = 300.0


@runtime_checkable
class NodeLockWriter(Protocol):
    """What the output port gives the node lock (the kube backend and the simulator provide it)."""

    async def read_node_annotations(self, node_name: str) -> tuple[Mapping[str, str], str] | None:
        """The Node's annotations and resourceVersion as the API server has them now (None: no
        such Node). Raises on any other failure."""

    async def pod_exists(self, namespace: str, name: str) -> bool:
        """Whether the pod exists now. Raises when that cannot be known."""

    async def patch_node_annotations(
        self, node_name: str, annotations: Mapping[str, str], resource_version: str
    ) -> None:
        """Set ``annotations`` on the Node, refused when it changed since ``resource_version``
        ("" for no precondition). Raises on failure."""


class NodeLockError(Exception):
    """The lock could not be taken; ``str()`` is ``failed to lock node: <why>``."""


def lock_value(now_wall: float, namespace: str, name: str) -> str:
    stamp = datetime.fromtimestamp(now_wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{stamp},{namespace},{name}"


def parse_lock_value(value: str) -> tuple[float, str, str]:
    """(unix seconds, namespace, name); raises ValueError with the spec's message."""
    parts = value.split(",")
    if len(parts) != 3:
        raise ValueError(f'invalid node lock value "{value}"')
    try:
        when = datetime.fromisoformat(parts[0])
    except ValueError:
        # Not in the spec (only the 3 parts are): a time that does not parse is as invalid.
        raise ValueError(f'invalid node lock value "{value}"') from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp(), parts[1], parts[2]


class NodeLocks:
    """The in-process mutexes, one per node while some binding cycle uses it (then dropped, so a
    deleted Node keeps none)."""

    def __init__(self) -> None:
        self._mutexes: dict[str, tuple[asyncio.Lock, int]] = {}

    def held(self) -> int:
        """How many nodes have a mutex now (for tests)."""
        return len(self._mutexes)

    async def lock(
        self, writer: NodeLockWriter, node_name: str, key: str, namespace: str, name: str, now_wall: float
    ) -> None:
        """Set ``key`` on the Node for the pod ``namespace/name``; raises :class:`NodeLockError`."""
        mutex, users = self._mutexes.get(node_name, (None, 0))
        if mutex is None:
            mutex = asyncio.Lock()
        self._mutexes[node_name] = (mutex, users + 1)
        try:
            async with mutex:
                await self._lock(writer, node_name, key, namespace, name, now_wall)
        finally:
            _, users = self._mutexes[node_name]
            if users <= 1:
                del self._mutexes[node_name]
            else:
                self._mutexes[node_name] = (mutex, users - 1)

    async def _lock(
        self, writer: NodeLockWriter, node_name: str, key: str, namespace: str, name: str, now_wall: float
    ) -> None:
        try:
            found = await writer.read_node_annotations(node_name)
        except Exception as err:  # any failure of the read fails the lock, said as it is
            raise NodeLockError(f'failed to lock node: failed to get node "{node_name}": {err}') from err
        if found is None:
            raise NodeLockError(f'failed to lock node: node "{node_name}" not found')
        annotations, resource_version = found
        current = annotations.get(key)
        if current is not None:
            try:
                since, holder_ns, holder = parse_lock_value(current)
            except ValueError as err:
                raise NodeLockError(f"failed to lock node: {err}") from None
            # Not in the spec: the pod's own lock (a bind of it that failed after PreBind) is taken
            # over too, else its retry would wait out the five minutes.
            if now_wall - since <= LOCK_EXPIRY_S and (holder_ns, holder) != (namespace, name):
                try:
                    exists = await writer.pod_exists(holder_ns, holder)
                except Exception as err:
                    raise NodeLockError(f"failed to lock node: {err}") from err
                if exists:
                    raise NodeLockError(f'failed to lock node: node "{node_name}" has been locked')
        try:
            await writer.patch_node_annotations(
                node_name, {key: lock_value(now_wall, namespace, name)}, resource_version
            )
        except Exception as err:
            raise NodeLockError(f"failed to lock node: {err}") from err
