"""``retrieval-lib export-trec``: the exported TREC files, scored by pytrec_eval (trec_eval's C
code), give our ``file.*`` metrics for every computable trial.

On the real CodeScaleBench sample (``../shared/corpus/csb``, read only: normalised and
evaluated into tmp_path) and on the bundled synthetic example, which has repeated trials
(qid = trial) and a degraded trial.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from retrieval_lib.bundled import __file__ as bundled_init
from retrieval_lib.cli import main
from retrieval_lib.study.families import family_of
from retrieval_lib.trec import read_qrels, read_run
from retrieval_lib.trec_export import encode_field

pytrec_eval = pytest.importorskip("pytrec_eval")

REPO = Path(__file__).resolve().parents[1]
CSB = REPO / ".." / "shared" / "corpus" / "csb"
EXAMPLES = Path(bundled_init).parent / "examples"

MEASURES = {
    "file.AP": "map",
    "file.RR": "recip_rank",
    **{f"file.P@{k}": f"P_{k}" for k in (1, 3, 5, 10)},
    **{f"file.R@{k}": f"recall_{k}" for k in (1, 3, 5, 10)},
    **{f"file.nDCG@{k}": f"ndcg_cut_{k}" for k in (1, 3, 5, 10)},
}


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


def _export(runs: Path, tasks_root: Path, tmp_path: Path) -> tuple[Path, pd.DataFrame]:
    before = _tree(runs)
    work, out = tmp_path / "work", tmp_path / "trec"
    assert main(["normalize", str(runs), "--tasks-root", str(tasks_root), "--out", str(work),
                 "--workers", "1", "--quiet"]) == 0  # fmt: skip
    assert main(["evaluate", str(work)]) == 0
    assert main(["export-trec", str(work), "--out", str(out)]) == 0
    assert _tree(runs) == before  # inputs only read
    table = pd.concat(
        [
            pd.read_parquet(p)
            for p in sorted(work.glob("*/retrieval_events/retrieval_metrics.parquet"))
        ],
        ignore_index=True,
    )
    return out, table


def _qid(row: pd.Series, table: pd.DataFrame) -> str:
    same_task = table[
        (table["run_id"] == row["run_id"])
        & (table["family"] == row["family"])
        & (table["task_name"] == row["task_name"])
    ]
    return row["task_name"] if len(same_task) == 1 else row["trial_name"]


def _check(out: Path, table: pd.DataFrame) -> int:
    compared = 0
    table = table.assign(family=table["config_name"].map(family_of))
    for (run_id, family), rows in table.groupby(["run_id", "family"]):
        run_file, qrels_file = out / run_id / f"{family}.run", out / run_id / f"{family}.qrels"
        run, qrels = read_run(run_file).scores, read_qrels(qrels_file)
        scored = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES.values())).evaluate(run)
        for _, row in rows.iterrows():
            qid = encode_field(_qid(row, table))
            if not row["computable"]:
                assert qid not in qrels and qid not in scored
                assert all(math.isnan(row[column]) for column in MEASURES)
                continue
            assert qid in qrels
            if qid not in scored:  # retrieved nothing: no run lines; ours is 0 (trec_eval -c)
                assert qid not in run
                assert all(row[column] == 0.0 for column in MEASURES)
                continue
            for column, measure in MEASURES.items():
                # the metrics files round to 6 decimals
                assert row[column] == pytest.approx(scored[qid][measure], abs=1e-6), (qid, column)
            compared += 1
    return compared


@pytest.mark.skipif(not (CSB / "runs").is_dir(), reason=f"corpus absent ({CSB.resolve()})")
def test_exported_csb_files_scored_by_pytrec_eval_equal_our_file_metrics(tmp_path):
    out, table = _export(CSB / "runs", CSB / "benchmarks", tmp_path)
    assert _check(out, table) == int(table["computable"].sum()) == 2


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    return _export(EXAMPLES / "runs", EXAMPLES / "benchmarks", tmp_path_factory.mktemp("ex"))


def test_exported_example_with_repeats_equals_our_file_metrics(example):
    out, table = example
    assert _check(out, table) >= 15
    run_text = (out / "csb_synth_haiku_20260301_091500" / "baseline-local-direct.run").read_text()
    # repeated trials of one task are separate queries named by the trial
    assert "istio-routeconfig-dep-chain-001__aP5NrTS Q0 " in run_text
    first = run_text.splitlines()[0].split(" ")
    assert first[1] == "Q0" and first[3] == "1" and first[5].endswith(":baseline-local-direct")


def test_ranks_follow_first_retrieval_and_scores_reproduce_them(example):
    out, _ = example
    for path in out.glob("*/*.run"):
        by_query: dict[str, list[tuple[int, float]]] = {}
        for line in path.read_text().splitlines():
            qid, _, _, rank, score, _ = line.split(" ")
            by_query.setdefault(qid, []).append((int(rank), float(score)))
        for pairs in by_query.values():
            assert [rank for rank, _ in pairs] == list(range(1, len(pairs) + 1))
            assert [score for _, score in pairs] == sorted({s for _, s in pairs}, reverse=True)


def test_whitespace_and_percent_are_encoded():
    assert encode_field("a b%c\td") == "a%20b%25c%09d"
    assert encode_field("ü x") == "ü%20x"
