"""The one pod-event hook (``PodEventsPlugin``): which plugins get it, and what each pod change
tells them (once per change, before the cache and the queue; the parsed pod when the scheduler
follows it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from koordsched.api.core import Pod
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import default_config, load_config
from koordsched.framework.types import PodInfo
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler
from tests.builders import node, pod
from tests.plugins.defaultpreemption.helpers import Recorder


@dataclass
class Seen:
    name: str = "Seen"
    #: (old name or "", new name or "", whether a PodInfo came, is the pod in the cache or queue yet)
    events: list[tuple[str, str, bool, bool]] = field(default_factory=list)
    sched: Scheduler | None = None

    def on_pod_event(self, old: Pod | None, new: Pod | None, info: PodInfo | None) -> None:
        assert self.sched is not None
        uid = (new or old).identity if (new or old) is not None else ""  # type: ignore[union-attr]
        known = self.sched.cache.pod_state(uid) is not None or self.sched.queue.get(uid) is not None
        self.events.append(
            (old.metadata.name if old else "", new.metadata.name if new else "", info is not None, known)
        )


def scheduler(bundled: bool) -> Scheduler:
    reg = in_tree_registry()
    config = load_config(default_profile_path(), reg) if bundled else default_config(reg, "koord-scheduler")
    return Scheduler(config, reg, Recorder(), VirtualClock())


def test_the_plugins_that_follow_pods_are_listed_once_and_others_pay_nothing() -> None:
    assert sorted(p.name for p in scheduler(True).events.pod_plugins) == [
        "Coscheduling",
        "ElasticQuota",
        "GPUFragmentation",
    ]
    assert scheduler(False).events.pod_plugins == []


def test_each_pod_change_is_told_once_before_the_cache_and_queue() -> None:
    sched = scheduler(False)
    seen = Seen(sched=sched)
    sched.events.pod_plugins = [seen]  # type: ignore[list-item]
    sched.on_node_add(node("n1"))
    pending = pod("a")
    sched.on_pod_add(pending)
    sched.on_pod_add(pod("other", scheduler="default-scheduler"))
    sched.on_pod_add(pod("bad", cpu="lots"))
    relabelled = msgspec.structs.replace(
        pending, metadata=msgspec.structs.replace(pending.metadata, labels={"x": "y"})
    )
    sched.on_pod_update(pending, relabelled)
    bound = pod("a", node_name="n1")
    sched.on_pod_update(relabelled, bound)
    sched.on_pod_delete(bound)
    done = pod("done", node_name="n1")
    sched.on_pod_add(
        msgspec.structs.replace(done, status=msgspec.structs.replace(done.status, phase="Succeeded"))
    )
    assert seen.events == [
        ("", "a", True, False),  # pending, ours: parsed, not queued yet
        ("", "other", False, False),  # another scheduler's pending pod
        ("", "bad", False, False),  # cannot be parsed
        ("a", "a", True, True),  # an update of a queued pod
        ("a", "a", True, True),  # bound (the queue still holds it until after the hook)
        ("a", "", False, True),  # deleted: told before the cache forgets it
        ("", "done", False, False),  # finished
    ]
