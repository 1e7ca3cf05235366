"""Profiles and rounds: what one descheduling round does, the same in both backends.

A profile's Evict plugin is the MigrationController (the only in-tree one); its Balance
plugins run in order over the nodes the config's and the profile's node selectors keep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from koordsched.api.core import LabelSelector, Node, Pod
from koordsched.api.selectors import match_label_selector
from koordsched.descheduler.config.load import DeschedulerConfig, ResolvedProfile
from koordsched.descheduler.framework import BalancePlugin, EvictOptions
from koordsched.descheduler.handle import SchedulerHandle
from koordsched.descheduler.migration.args import MigrationControllerArgs
from koordsched.descheduler.migration.controller import MigrationController
from koordsched.descheduler.migration.filters import PodFilter
from koordsched.descheduler.plugins.gpubalance import GPUBalance, GPUBalanceArgs
from koordsched.descheduler.plugins.lownodeload import LowNodeLoad, LowNodeLoadArgs
from koordsched.descheduler.registry import GPU_BALANCE, LOW_NODE_LOAD, MIGRATION_CONTROLLER

_A = TypeVar("_A")


@dataclass
class RoundLimits:
    """``maxNoOfPodsToEvictPerNode`` / ``PerNamespace`` / ``Total``: evictions asked per round,
    counted in front of the Evict plugin (reset by :func:`run_round`)."""

    evictor: MigrationController
    per_node: int | None = None
    per_namespace: int | None = None
    total: int | None = None
    nodes: dict[str, int] = field(default_factory=dict)
    namespaces: dict[str, int] = field(default_factory=dict)
    count: int = 0

    def reset(self) -> None:
        self.nodes.clear()
        self.namespaces.clear()
        self.count = 0

    def filter(self, pod: Pod) -> bool:
        return self.evictor.filter(pod)

    def evict(self, pod: Pod, options: EvictOptions) -> bool:
        node, ns = pod.spec.node_name, pod.metadata.namespace
        if self.total is not None and self.count >= self.total:
            return False
        if self.per_node is not None and self.nodes.get(node, 0) >= self.per_node:
            return False
        if self.per_namespace is not None and self.namespaces.get(ns, 0) >= self.per_namespace:
            return False
        if not self.evictor.evict(pod, options):
            return False
        self.count += 1
        self.nodes[node] = self.nodes.get(node, 0) + 1
        self.namespaces[ns] = self.namespaces.get(ns, 0) + 1
        return True


@dataclass
class Profile:
    config: ResolvedProfile
    handle: SchedulerHandle
    controller: MigrationController
    balance: list[BalancePlugin] = field(default_factory=list)
    limits: RoundLimits | None = None

    @property
    def name(self) -> str:
        return self.config.name


def build_profiles(
    config: DeschedulerConfig,
    handle_for: Callable[[], SchedulerHandle],
    balance_factories: dict[str, Callable[[object, SchedulerHandle], BalancePlugin]] | None = None,
) -> list[Profile]:
    """One :class:`Profile` per configured profile, its plugins built with their args."""
    factories: dict[str, Callable[[object, SchedulerHandle], BalancePlugin]] = {
        LOW_NODE_LOAD: lambda a, h: LowNodeLoad(_expect(a, LowNodeLoadArgs), h),
        GPU_BALANCE: lambda a, h: GPUBalance(_expect(a, GPUBalanceArgs), h),
        **(balance_factories or {}),
    }
    out: list[Profile] = []
    for prof in config.profiles:
        handle = handle_for()
        mc_args = prof.args_of(MIGRATION_CONTROLLER)
        if not isinstance(mc_args, MigrationControllerArgs):
            mc_args = MigrationControllerArgs()
        pod_filter = PodFilter(
            mc_args, handle.priority_of_class, handle.replicas_of, handle.node_labels, handle.fits_elsewhere
        )
        controller = MigrationController(
            mc_args, pod_filter, handle.wall, dry_run=config.dry_run, unavailable_of=handle.unavailable_of
        )
        limits = RoundLimits(
            controller, config.max_pods_per_node, config.max_pods_per_namespace, config.max_pods_total
        )
        handle.evictor_impl = limits
        plugins: list[BalancePlugin] = []
        for name in prof.enabled("balance"):
            factory = factories.get(name)
            if factory is None:
                raise ValueError(f"profile {prof.name}: no Balance plugin {name}")
            plugins.append(factory(prof.args_of(name), handle))
        out.append(Profile(prof, handle, controller, plugins, limits))
    return out


def _expect(args: object, kind: type[_A]) -> _A:
    if not isinstance(args, kind):
        raise TypeError(f"expected {kind.__name__}, got {type(args).__name__}")
    return args


def _selects(sel: LabelSelector | None, node: Node) -> bool:
    return sel is None or match_label_selector(sel, node.metadata.labels)


def run_round(config: DeschedulerConfig, profiles: list[Profile], nodes: list[Node]) -> None:
    """One round: every profile's Balance plugins over its nodes (unschedulable ones included:
    LowNodeLoad never picks them as destinations but may move pods off them)."""
    kept = [n for n in nodes if _selects(config.node_selector, n)]
    for prof in profiles:
        mine = [n for n in kept if _selects(prof.config.node_selector, n)]
        if prof.limits is not None:
            prof.limits.reset()
        for plugin in prof.balance:
            plugin.balance(mine)
