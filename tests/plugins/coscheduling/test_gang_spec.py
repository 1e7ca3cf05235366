"""How a gang is read: the pod's gang name, annotation gangs, PodGroup gangs, args (spec 2.1, 3.3, 4.4)."""

from __future__ import annotations

import pytest

from koordsched.api.field_errors import Refused
from koordsched.api.kinds import POD_GROUPS
from koordsched.api.podgroup import check_pod_group
from koordsched.config.catalog import ArgsError
from koordsched.plugins.coscheduling import CoschedulingArgs
from koordsched.plugins.coscheduling.gang import GangSpec, GangSpecError, gang_id_of, spec_from_pod
from tests.plugins.coscheduling.helpers import add, gang_pod, make, pod_group


@pytest.mark.parametrize(
    ("labels", "annotation", "expected"),
    [
        ({"pod-group.scheduling.sigs.k8s.io": "pg"}, "anno", "default/pg"),
        ({"pod-group.scheduling.sigs.k8s.io/name": "old"}, "anno", "default/old"),
        (
            {"pod-group.scheduling.sigs.k8s.io": "pg", "pod-group.scheduling.sigs.k8s.io/name": "old"},
            "",
            "default/pg",
        ),
        ({}, "anno", "default/anno"),
        ({}, "", ""),
    ],
)
def test_gang_name_order_label_then_deprecated_label_then_annotation(
    labels: dict[str, str], annotation: str, expected: str
) -> None:
    pod = gang_pod("p", gang=annotation, labels=labels)
    assert gang_id_of(pod) == expected


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, GangSpec(3, 3, "Strict", "once-satisfied", 600.0, ("default/g",))),
        ({"total_number": "5"}, GangSpec(3, 5, "Strict", "once-satisfied", 600.0, ("default/g",))),
        # A total below min is raised to min.
        ({"total_number": "2"}, GangSpec(3, 3, "Strict", "once-satisfied", 600.0, ("default/g",))),
        ({"mode": "NonStrict"}, GangSpec(3, 3, "NonStrict", "once-satisfied", 600.0, ("default/g",))),
        ({"mode": "nonstrict"}, GangSpec(3, 3, "Strict", "once-satisfied", 600.0, ("default/g",))),
        ({"match_policy": "only-waiting"}, GangSpec(3, 3, "Strict", "only-waiting", 600.0, ("default/g",))),
        (
            {"match_policy": "waiting-and-running"},
            GangSpec(3, 3, "Strict", "waiting-and-running", 600.0, ("default/g",)),
        ),
        ({"match_policy": "bogus"}, GangSpec(3, 3, "Strict", "once-satisfied", 600.0, ("default/g",))),
        ({"waiting_time": "30s"}, GangSpec(3, 3, "Strict", "once-satisfied", 30.0, ("default/g",))),
        # Invalid or non-positive waiting-time: the default timeout.
        ({"waiting_time": "soon"}, GangSpec(3, 3, "Strict", "once-satisfied", 600.0, ("default/g",))),
        ({"waiting_time": "-5s"}, GangSpec(3, 3, "Strict", "once-satisfied", 600.0, ("default/g",))),
        (
            {"groups": '["default/g","other/h"]'},
            GangSpec(3, 3, "Strict", "once-satisfied", 600.0, ("default/g", "other/h")),
        ),
    ],
)
def test_annotation_gang_spec(annotations: dict[str, str], expected: GangSpec) -> None:
    pod = gang_pod("p", **annotations)
    assert spec_from_pod(pod, "default/g", 600.0) == expected


def test_pod_group_match_policy_alias_read_when_gang_key_is_empty() -> None:
    pod = gang_pod("p")
    pod.metadata.annotations["pod-group.scheduling.sigs.k8s.io/match-policy"] = "only-waiting"
    assert spec_from_pod(pod, "default/g", 600.0).match_policy == "only-waiting"


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        (
            {"min_available": "three"},
            'annotation gang.scheduling.koordinator.sh/min-available: invalid value "three"',
        ),
        ({"min_available": "-1"}, "must not be negative"),
        # Issue 24, item 7: Go's strconv.Atoi, not Python's int().
        ({"min_available": "\u0968"}, 'min-available: invalid value "\u0968": must be an integer'),
        ({"min_available": " 2"}, 'min-available: invalid value " 2": must be an integer'),
        ({"min_available": "2_0"}, 'min-available: invalid value "2_0": must be an integer'),
        ({"min_available": "9223372036854775808"}, "must be an integer"),
        ({"groups": "default/g"}, "annotation gang.scheduling.koordinator.sh/groups: must be a JSON list"),
        ({"groups": '["nonamespace"]'}, '"nonamespace" is not a gang id'),
    ],
)
def test_unreadable_gang_annotations_are_named(annotations: dict[str, str], message: str) -> None:
    min_available = annotations.pop("min_available", "3")
    pod = gang_pod("p", min_available=min_available, **annotations)
    with pytest.raises(GangSpecError, match=message.replace("[", r"\[")):
        spec_from_pod(pod, "default/g", 600.0)


@pytest.mark.parametrize(
    ("raw", "total", "note"),
    [
        ("", 3, ""),
        ("5", 5, ""),
        ("+5", 5, ""),
        ("1", 3, ""),  # below min: raised to min, as Koordinator
        ("x", 3, 'invalid value "x": strconv.ParseInt: parsing "x": invalid syntax'),
        (" 5", 3, 'invalid value " 5": strconv.ParseInt: parsing " 5": invalid syntax'),
        ("5_0", 3, "invalid syntax"),
        ("\u0968", 3, "invalid syntax"),
        ("2147483648", 3, 'strconv.ParseInt: parsing "2147483648": value out of range'),
    ],
)
def test_total_number_is_read_as_koordinator_reads_it(raw: str, total: int, note: str) -> None:
    """Issue 24, item 7: Koordinator logs an unreadable total-number and uses min-available."""
    pod = gang_pod("p", total_number=raw) if raw else gang_pod("p")
    spec = spec_from_pod(pod, "default/g", 600.0)
    assert spec.total_children == total
    if not note:
        assert spec.notes == ()
    else:
        (got,) = spec.notes
        assert got.startswith("pod default/p: annotation gang.scheduling.koordinator.sh/total-number: ")
        assert note in got and got.endswith("read as 3, the gang's min-available, as Koordinator does")


def test_pod_group_spec_and_its_updates_are_read() -> None:
    plugin, handle = make()
    handle.put(POD_GROUPS, pod_group("pg", 2, timeout=30, mode="NonStrict", total_number="4"))
    pod = gang_pod("a", gang="", min_available=None, labels={"pod-group.scheduling.sigs.k8s.io": "pg"})
    add(plugin, pod)
    gang = plugin.cache.get("default/pg")
    assert gang is not None and gang.spec == GangSpec(
        2, 4, "NonStrict", "once-satisfied", 30.0, ("default/pg",)
    )
    # A new version of the PodGroup is read again; waiting-time is never read from PodGroups.
    handle.put(POD_GROUPS, pod_group("pg", 5, waiting_time="1s"))
    gang = plugin.cache.get("default/pg")
    assert gang is not None and gang.spec == GangSpec(
        5, 5, "Strict", "once-satisfied", 600.0, ("default/pg",)
    )
    del handle.store_for(POD_GROUPS)["default/pg"]
    gang = plugin.cache.get("default/pg")
    assert gang is not None and gang.spec is None


def test_unreadable_pod_group_annotations_leave_the_gang_uninitialised_until_fixed() -> None:
    """Issue 24, item 1: no exception from the cache (PreEnqueue, the PodGroup status pass)."""
    plugin, handle = make()
    handle.put(POD_GROUPS, pod_group("pg", 1, groups='{"a": 1}'))
    pod = gang_pod("a", gang="", min_available=None, labels={"pod-group.scheduling.sigs.k8s.io": "pg"})
    (info,) = add(plugin, pod)
    gang = plugin.cache.get("default/pg")
    assert gang is not None and gang.spec is None
    assert gang.init_error.startswith("PodGroup default/pg: annotation gang.scheduling.koordinator.sh/groups")
    assert not plugin.pre_enqueue(info).ok
    assert [r.error for r in plugin.gangs()] == [gang.init_error]
    plugin.pod_group_updates("2024-01-01T00:00:00Z")
    handle.put(POD_GROUPS, pod_group("pg", 1, groups='["default/pg"]'))
    assert plugin.pre_enqueue(info).ok
    assert [r.error for r in plugin.gangs()] == [""]


@pytest.mark.parametrize(
    ("min_member", "timeout", "message"),
    [
        (-1, None, "spec.minMember: Invalid value: -1"),
        (2**31, None, "spec.minMember: Invalid value: 2147483648"),
        (1, 2**31, "spec.scheduleTimeoutSeconds: Invalid value: 2147483648"),
    ],
)
def test_pod_group_out_of_range_is_refused(min_member: int, timeout: int | None, message: str) -> None:
    with pytest.raises(Refused, match=message) as info:
        check_pod_group(pod_group("pg", min_member, timeout=timeout))
    assert str(info.value).startswith('PodGroup.scheduling.sigs.k8s.io "default/pg" is invalid: ')


def test_args_defaults_and_validation() -> None:
    args = CoschedulingArgs()
    assert (args.default_timeout_seconds(), args.controller_workers, args.skip_check_schedule_cycle) == (
        600.0,
        1,
        False,
    )
    with pytest.raises(ArgsError, match="controllerWorkers: Invalid value: 0: must be at least 1"):
        CoschedulingArgs(controller_workers=0).validate()
    with pytest.raises(ArgsError, match='defaultTimeout: Invalid value: "-1s": must not be negative'):
        CoschedulingArgs(default_timeout="-1s").validate()
    with pytest.raises(ArgsError, match='defaultTimeout: Invalid value: "ten"'):
        CoschedulingArgs(default_timeout="ten").validate()
