"""Quantities that Kubernetes accepts but that do not fit Go's int64: told apart from malformed ones."""

from __future__ import annotations

import pytest

from koordsched.api.core import Container, Pod, ResourceRequirements
from koordsched.api.quantity import (
    INT64_MAX,
    QuantityError,
    QuantityRangeError,
    check_int64,
    int_value_int64,
    milli_value_int64,
)
from koordsched.api.resources import checked_pod_requests, too_large


@pytest.mark.parametrize(
    ("q", "read"),
    [
        ("8Ei", int_value_int64),  # 2^63 bytes: one past int64
        ("99999999999999999999", int_value_int64),
        ("1e18", milli_value_int64),  # 1e21 millicores
        ("-9223372036854775809", int_value_int64),
        (10**19, int_value_int64),
        (1e30, milli_value_int64),
    ],
)
def test_too_large_is_a_range_error_naming_the_value(q: str | int | float, read: object) -> None:
    assert callable(read)
    with pytest.raises(QuantityRangeError) as err:
        read(q)
    assert err.value.too_large
    assert err.value.quantity == q
    assert repr(q) in str(err.value)
    assert "int64" in str(err.value)


@pytest.mark.parametrize("q", ["8 cores", "1Qi", "", "--1", "1e", True])
def test_malformed_is_not_a_range_error(q: str | bool) -> None:
    with pytest.raises(QuantityError) as err:
        int_value_int64(q)
    assert not isinstance(err.value, QuantityRangeError)
    assert not err.value.too_large
    assert err.value.quantity == q


@pytest.mark.parametrize(
    ("q", "want"),
    [
        ("7Ei", 7 * 2**60),
        ("9223372036854775807", INT64_MAX),
        ("-4", -4),
        ("9223372036854775807m", 9223372036854776),
    ],
)
def test_in_range_values_read_as_before(q: str, want: int) -> None:
    assert int_value_int64(q) == want


def test_milli_boundary() -> None:
    assert milli_value_int64("9223372036854775807m") == INT64_MAX
    with pytest.raises(QuantityRangeError):
        milli_value_int64("9223372036854775808m")


def test_within_keeps_class_and_value() -> None:
    with pytest.raises(QuantityRangeError) as err:
        int_value_int64("8Ei")
    wrapped = err.value.within("resource 'memory'")
    assert isinstance(wrapped, QuantityRangeError)
    assert wrapped.quantity == "8Ei"
    assert str(wrapped).startswith("resource 'memory': quantity '8Ei' is too large")
    assert check_int64(5, "5") == 5


@pytest.mark.parametrize("q", ["1" * 5000, "1e99999"])
def test_hostile_sizes_are_range_errors(q: str) -> None:
    with pytest.raises(QuantityRangeError):
        int_value_int64(q)


def test_amounts_past_python_printing_are_described_not_printed() -> None:
    """ "1E4297" read in millicores has 4301 digits, more than Python prints: every message that
    names such an amount gives its magnitude instead of raising ValueError."""

    with pytest.raises(QuantityRangeError, match=r"about 10\^4300 milli-units is above the int64 maximum"):
        milli_value_int64("1E4297")
    assert "about 10^4300 milli-units" in too_large("cpu", "1E4297", 10**4300)
    pod = Pod()
    pod.spec.containers = [Container(name="c", resources=ResourceRequirements(requests={"cpu": "1E4297"}))]
    with pytest.raises(QuantityError, match="about 10"):
        checked_pod_requests(pod)
