"""The partitioned metrics dataset (one Parquet file per run and config) and the lazy
study aggregates read from it, against the whole tables read with pandas."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyarrow")

from retrieval_lib.errors import InputError  # noqa: E402
from retrieval_lib.metrics.summary import DATASET_DIRNAME, evaluate_run  # noqa: E402
from retrieval_lib.normalize import normalize_paths  # noqa: E402
from retrieval_lib.study.lazy import aggregate_metrics, dataset_files, metrics_dataset  # noqa: E402

COLUMNS = ["file.recall", "file.AP", "reward", "total_tokens", "chunk.recall"]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from retrieval_lib.synth import generate_runs

    root = tmp_path_factory.mktemp("lazy")
    generate_runs(root / "data", n_tasks=22, seed=5, n_runs=2)
    normalize_paths([root / "data" / "runs"], root / "data" / "benchmarks", out=root / "out")
    return [evaluate_run(run).events_dir for run in sorted((root / "out").iterdir())]


def test_one_file_per_run_and_config_holding_that_part_of_the_table(evaluated):
    assert len(evaluated) == 3
    for events_dir in evaluated:
        table = pd.read_parquet(events_dir / "retrieval_metrics.parquet")
        files = sorted((events_dir / DATASET_DIRNAME).iterdir())
        assert [f.name for f in files] == [
            f"{c}.parquet" for c in sorted(table["config_name"].unique())
        ]
        for path in files:
            part = pd.read_parquet(path)
            want = table[table["config_name"] == path.stem].reset_index(drop=True)
            pd.testing.assert_frame_equal(part, want)
    assert len(dataset_files(evaluated)) == sum(
        pd.read_parquet(d / "retrieval_metrics.parquet")["config_name"].nunique() for d in evaluated
    )


def test_the_dataset_reads_every_row_lazily(evaluated):
    dataset = metrics_dataset(evaluated)
    whole = pd.concat(
        [pd.read_parquet(d / "retrieval_metrics.parquet") for d in evaluated], ignore_index=True
    )
    assert dataset.count_rows() == len(whole) > 50
    scanned = dataset.to_table(columns=["run_id", "file.recall"]).to_pandas()
    assert sorted(scanned["run_id"].unique()) == sorted(whole["run_id"].unique())


def _expected(whole: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    rows = []
    for key, group in whole.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        for column in COLUMNS:
            values = group[column].to_numpy(dtype=np.float64, na_value=np.nan)
            values = values[~np.isnan(values)]
            rows.append(
                (
                    *key,
                    column,
                    values.size,
                    values.mean() if values.size else np.nan,
                    values.std(ddof=1) if values.size >= 2 else np.nan,
                )
            )
    return pd.DataFrame(rows, columns=[*by, "metric", "n", "mean", "std"])


@pytest.mark.parametrize("batch_rows", [3, 65_536])
def test_aggregates_match_the_whole_table(evaluated, batch_rows):
    whole = pd.concat(
        [pd.read_parquet(d / "retrieval_metrics.parquet") for d in evaluated], ignore_index=True
    )
    for by in (["config_name"], ["run_id", "config_name"]):
        got = aggregate_metrics(evaluated, COLUMNS, by=by, batch_rows=batch_rows)
        want = _expected(whole, by)
        pd.testing.assert_frame_equal(got[[*by, "metric", "n"]], want[[*by, "metric", "n"]])
        np.testing.assert_allclose(got["mean"], want["mean"], rtol=1e-12, equal_nan=True)
        np.testing.assert_allclose(got["std"], want["std"], rtol=1e-9, equal_nan=True)
    assert (got["n"] > 0).any() and (got["std"].notna()).any()


def test_a_config_the_run_no_longer_has_is_removed(evaluated, tmp_path):
    stale = evaluated[0] / DATASET_DIRNAME / "gone-config.parquet"
    stale.write_bytes(b"PAR1")
    evaluate_run(evaluated[0])
    assert not stale.exists()


def test_a_run_without_the_dataset_is_refused(tmp_path):
    with pytest.raises(InputError, match="evaluate"):
        dataset_files([tmp_path])
