"""Property: every quantity is read within int64, or refused with an error naming it that says
whether it is malformed or too large, and never costs more than a moment."""

from __future__ import annotations

import math
import time
from typing import Any

from hypothesis import HealthCheck, given, settings

from koordsched.api.quantity import (
    INT64_MAX,
    INT64_MIN,
    QuantityError,
    QuantityRangeError,
    int_value_int64,
    milli_value_int64,
    parse_quantity,
    show_quantity,
)
from tests.validation.strategies import quantities

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(q=quantities())
def test_quantity_is_read_in_int64_or_refused_clearly(q: Any) -> None:
    t0 = time.perf_counter()
    for read, scale in ((int_value_int64, 1), (milli_value_int64, 1000)):
        try:
            value = read(q)
        except QuantityRangeError as err:
            assert err.too_large and err.quantity == q
            assert show_quantity(q) in str(err)
            try:
                exact = parse_quantity(q)
            except QuantityRangeError:
                continue  # beyond the parser's own bounds (thousands of digits)
            assert not INT64_MIN <= math.ceil(exact * scale) <= INT64_MAX
        except QuantityError as err:
            assert not err.too_large and err.quantity == q
            assert str(err).startswith(f"invalid quantity {show_quantity(q)}")
        else:
            assert INT64_MIN <= value <= INT64_MAX
            assert value == math.ceil(parse_quantity(q) * scale)
    assert time.perf_counter() - t0 < 0.5
