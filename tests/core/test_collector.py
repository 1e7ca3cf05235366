"""The collector settings both backends' loops run under (koordsched/scheduler/collector.py)."""

from __future__ import annotations

import gc

import pytest

from koordsched.scheduler.collector import LOOP_THRESHOLDS, LoopCollector, loop_collector


class _Held:
    """An object the collector tracks (instances of a plain class are GC-tracked)."""


@pytest.mark.parametrize("full", [True, False])
def test_loaded_objects_frozen_thresholds_raised_then_restored(full: bool) -> None:
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    loaded = _Held()
    with loop_collector(full_collection=full) as stats:
        assert gc.get_threshold() == LOOP_THRESHOLDS
        assert gc.get_freeze_count() > 0
        # Frozen: no collection walks the objects loaded before the loop began.
        assert not any(o is loaded for o in gc.get_objects())
        made = _Held()
        assert any(o is made for o in gc.get_objects())
        gc.collect(0)
        gc.collect(2)
    assert stats.collections >= 2 and stats.full >= 1 and stats.seconds > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    assert stats.callback not in gc.callbacks
    assert any(o is loaded for o in gc.get_objects())


def test_cyclic_garbage_made_in_the_loop_is_still_collected() -> None:
    collector = LoopCollector()
    try:
        a, b = _Held(), _Held()
        a.other, b.other = b, a  # type: ignore[attr-defined]
        del a, b
        assert gc.collect() >= 2
    finally:
        collector.restore()
    collector.restore()  # a second restore changes nothing
    assert gc.get_freeze_count() == 0


def test_restored_on_error() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), loop_collector():
        raise RuntimeError("the loop failed")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
