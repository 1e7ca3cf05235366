"""What a traced stage span says about its plugins: those that ran, and those that rejected the pod.

The cycles call :func:`record_plugins` inside each ``span.stage(...)`` block; it returns at once
unless the stage span is recording (a sampled cycle), so an untraced cycle never builds the
lists. Which plugins ran follows the framework's rules: a plugin that PreFilter or PreScore
marked Skip does not run at Filter or Score, one a Reserve plugin skipped (``skip_binding``) runs
at no binding point, and every point but Filter stops at the first plugin that rejects.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from opentelemetry.trace import Span

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.runtime import Framework
from koordsched.framework.status import Status

#: The plugins a stage ran, in the profile's order.
PLUGINS_RUN = "scheduler.plugins.run"
#: The plugins whose verdict stopped the pod at that stage (Filter: every plugin that rejected a node).
PLUGINS_REJECTED = "scheduler.plugins.rejected"


def _stage_names(fw: Framework, state: CycleState, stage: str) -> tuple[list[str], Collection[str]]:
    """The stage's plugins in order, and those skipped there."""
    if stage == "PreFilter":
        return [p.name for p in fw.pre_filter], ()
    if stage == "Filter":
        return [s.plugin.name for s in fw.filters], state.skip_filter
    if stage == "Score":
        names = [p.name for p in fw.pre_score]
        names += [s.plugin.name for s in fw.scorers if s.plugin.name not in names]
        return names, state.skip_score
    if stage == "PostFilter":
        return [p.name for p in fw.post_filter], ()
    if stage == "Reserve":
        return [p.name for p in fw.reserve], state.skip_binding
    if stage in ("Permit", "WaitOnPermit"):
        return [p.name for p in fw.permit], state.skip_binding
    if stage == "PreBind":
        return [p.name for p in fw.pre_bind], state.skip_binding
    if stage == "Bind":
        return [p.name for p in fw.bind_plugins], state.skip_binding
    raise ValueError(f"unknown stage {stage!r}")


def plugins_run(names: Iterable[str], skipped: Collection[str], stopped_by: str | None) -> list[str]:
    """``names`` without the skipped ones, up to and including ``stopped_by`` (the plugin that
    ended the stage, when one did)."""
    out = []
    for name in names:
        if name in skipped:
            continue
        out.append(name)
        if name == stopped_by:
            break
    return out


def record_plugins(
    span: Span,
    fw: Framework,
    state: CycleState,
    stage: str,
    status: Status | None = None,
    rejected: Collection[str] = (),
) -> None:
    """Set the stage span's plugin attributes (nothing unless it is recording).

    ``status`` is the stage's outcome: a failing one names the plugin that stopped it (it rejected
    the pod unless it is an error or a Permit wait). ``rejected`` lists the rejecting plugins of a
    stage that does not stop at the first (Filter)."""
    if not span.is_recording():
        return
    names, skipped = _stage_names(fw, state, stage)
    stopped_by = status.plugin if status is not None and not status.ok else None
    span.set_attribute(PLUGINS_RUN, plugins_run(names, skipped, stopped_by))
    refused = sorted(rejected)
    if not refused and status is not None and status.rejected and status.plugin:
        refused = [status.plugin]
    span.set_attribute(PLUGINS_REJECTED, refused)
