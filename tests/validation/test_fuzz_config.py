"""Property: a mutated KubeSchedulerConfiguration loads into a config whose numbers the
scheduler can use, or is a ConfigError naming where it is wrong; never another exception,
never slow."""

from __future__ import annotations

import math
import time
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordsched.api.durations import MAX_DURATION_SECONDS
from koordsched.config.default_profile import default_profile_path
from koordsched.config.errors import ConfigError
from koordsched.config.load import load_config
from koordsched.config.resolved import SchedulerConfig
from koordsched.plugins.registry import in_tree_registry
from tests.validation.strategies import json_values, quantities, wide_ints

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REGISTRY = in_tree_registry()

BASE: dict[str, Any] = yaml.safe_load(default_profile_path().read_text())
BASE.update(
    {
        "parallelism": 16,
        "percentageOfNodesToScore": 0,
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 10,
        "clientConnection": {"qps": 50.0, "burst": 100},
    }
)
BASE["leaderElection"].update({"leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "2s"})

Path = tuple[str | int, ...]


def _paths(value: Any, prefix: Path = ()) -> list[Path]:
    out: list[Path] = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


PATHS = _paths(BASE)


def durations() -> st.SearchStrategy[str]:
    units = st.sampled_from(["ns", "us", "ms", "s", "m", "h", "x", ""])
    number = st.one_of(st.integers(0, 10**25).map(str), st.floats(0, 1e30, allow_nan=False).map(repr))
    return st.one_of(
        st.tuples(st.sampled_from(["", "-", "+"]), number, units).map("".join),
        st.sampled_from(["99999999999h", "2562048h", "2562047h47m16.854775807s", "0s", "1m30s", ".5s"]),
    )


def hostile_values() -> st.SearchStrategy[Any]:
    deep = st.integers(1, 200).map(lambda n: _nest(n))
    return st.one_of(
        wide_ints(),
        st.floats(),  # NaN and infinities included
        quantities(),
        durations(),
        st.text(max_size=20),
        st.booleans(),
        st.none(),
        json_values(),
        deep,
    )


def _nest(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def _set(doc: Any, path: Path, value: Any) -> None:
    for step in path[:-1]:
        doc = doc[step]
    doc[path[-1]] = value


def _copy(value: Any) -> Any:
    return yaml.safe_load(yaml.safe_dump(value))


def _check_usable(cfg: SchedulerConfig) -> None:
    assert 0 < cfg.parallelism < 2**31
    assert 0 <= cfg.percentage_of_nodes_to_score <= 100
    assert 0 < cfg.pod_initial_backoff_seconds <= cfg.pod_max_backoff_seconds <= MAX_DURATION_SECONDS
    cc = cfg.client_connection
    assert math.isfinite(cc.qps) and cc.qps >= 0 and 0 <= cc.burst < 2**31
    le = cfg.leader_election
    for seconds in (le.lease_duration, le.renew_deadline, le.retry_period):
        assert math.isfinite(seconds) and abs(seconds) <= MAX_DURATION_SECONDS + 1


# Generous: it catches inputs that take minutes (alias bombs, huge expansions), not a loaded
# machine's slow second.
LOAD_BOUND_S = 10.0


def _load(doc: Any) -> SchedulerConfig | ConfigError:
    text = yaml.safe_dump(doc, sort_keys=False).encode()
    t0 = time.perf_counter()
    try:
        cfg = load_config(text, REGISTRY)
    except ConfigError as err:
        assert str(err) and err.detail
        assert time.perf_counter() - t0 < LOAD_BOUND_S
        return err
    assert time.perf_counter() - t0 < LOAD_BOUND_S
    _check_usable(cfg)
    return cfg


@FUZZ
@given(path=st.sampled_from(PATHS), value=hostile_values())
def test_mutated_config_loads_usable_or_fails_naming_the_field(path: Path, value: Any) -> None:
    doc = _copy(BASE)
    _set(doc, path, value)
    _load(doc)


#: The objects (not maps keyed by resource name) of the config: a key they do not know is refused.
STRUCTS: list[Path] = [
    (),
    ("leaderElection",),
    ("clientConnection",),
    ("profiles", 0),
    ("profiles", 0, "plugins"),
    *[("profiles", 0, "pluginConfig", i) for i in range(len(BASE["profiles"][0]["pluginConfig"]))],
    *[("profiles", 0, "pluginConfig", i, "args") for i in range(len(BASE["profiles"][0]["pluginConfig"]))],
]


@FUZZ
@given(path=st.sampled_from(STRUCTS), key=st.text(min_size=1, max_size=10))
def test_unknown_field_is_named(path: Path, key: str) -> None:
    doc = _copy(BASE)
    parent: Any = doc
    for step in path:
        parent = parent[step]
    if key in parent:
        return
    parent[key] = 1
    result = _load(doc)
    # A strict decode names the unknown field (plugin args included), as kube-scheduler's does.
    assert isinstance(result, ConfigError), key
    assert key in str(result) or repr(key)[1:-1] in str(result), result


NUMERIC: list[tuple[Path, str, st.SearchStrategy[Any]]] = [
    (("parallelism",), "parallelism", st.integers().filter(lambda v: not 0 < v < 2**31)),
    (
        ("clientConnection", "qps"),
        "clientConnection.qps",
        st.sampled_from([math.nan, math.inf, -math.inf, 1e39, -1.0]),
    ),
    (
        ("clientConnection", "burst"),
        "clientConnection.burst",
        st.integers().filter(lambda v: not 0 <= v < 2**31),
    ),
    (
        ("podInitialBackoffSeconds",),
        "podInitialBackoffSeconds",
        st.integers().filter(lambda v: v <= 0 or v > MAX_DURATION_SECONDS),
    ),
    (("podMaxBackoffSeconds",), "podMaxBackoffSeconds", st.integers(MAX_DURATION_SECONDS + 1, 2**70)),
    (
        ("leaderElection", "leaseDuration"),
        "leaderElection.leaseDuration",
        st.integers(2562048, 10**20).map(lambda h: f"{h}h"),
    ),
    (
        ("percentageOfNodesToScore",),
        "percentageOfNodesToScore",
        st.integers().filter(lambda v: not 0 <= v <= 100),
    ),
]


@FUZZ
@given(data=st.data(), which=st.integers(0, len(NUMERIC) - 1))
def test_out_of_range_numbers_name_their_field(data: st.DataObject, which: int) -> None:
    path, where, values = NUMERIC[which]
    doc = _copy(BASE)
    _set(doc, path, data.draw(values))
    result = _load(doc)
    assert isinstance(result, ConfigError)
    assert result.where == where, result
