"""``stats.columns.as_float``'s one-pass paths equal the cell-by-cell conversion they replaced
(issue 20: every per-config mean converted its values one Python call per cell)."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from retrieval_lib.errors import StatisticsError
from retrieval_lib.stats.columns import _scalar_to_float, as_float
from retrieval_lib.study.analysis import _as_bool_float

POOL = [1.0, 0, 3, None, np.nan, pd.NA, True, False, np.float32(2.5), np.int64(7), -0.0]
POOL += [float("inf"), 2**60 + 1, np.bool_(True), pd.NaT, "1.5"]


def _cell_by_cell(series: pd.Series) -> pd.Series:
    return pd.Series(
        [_scalar_to_float(v) for v in series.tolist()], index=series.index, dtype=float
    )


def test_object_cells_convert_as_cell_by_cell_or_raise_alike():
    rng = random.Random(20)
    checked = raised = 0
    for _ in range(3000):
        cells = [rng.choice(POOL) for _ in range(rng.randint(0, 6))]
        series = pd.Series(cells, dtype=object, index=range(5, 5 + len(cells)))
        try:
            expected = _cell_by_cell(series)
        except StatisticsError:
            with pytest.raises(StatisticsError):
                as_float(series)
            raised += 1
            continue
        pd.testing.assert_series_equal(as_float(series), expected, check_exact=True)
        checked += 1
    assert checked > 1000 and raised > 100


@pytest.mark.parametrize(
    ("values", "dtype", "expected"),
    [
        ([True, None, False], "boolean", [1.0, np.nan, 0.0]),
        ([1, None, 3], "Int64", [1.0, np.nan, 3.0]),
        ([1.5, None], "Float64", [1.5, np.nan]),
        ([1.0, None], "float64[pyarrow]", [1.0, np.nan]),
    ],
)
def test_nullable_dtypes_give_nan_for_missing(values, dtype, expected):
    got = as_float(pd.Series(values, dtype=dtype))
    np.testing.assert_array_equal(got.to_numpy(), np.array(expected))
    assert got.dtype == np.float64


def test_passed_as_float_keeps_missing_missing():
    for dtype in ("boolean", object):
        series = pd.Series([True, None, False, True], dtype=dtype, name="passed")
        got = _as_bool_float(series)
        np.testing.assert_array_equal(got.to_numpy(dtype=float), [1.0, np.nan, 0.0, 1.0])
