"""TREC files and trec_eval's measures, against trec_eval's own expected output and pytrec_eval.

References: ``out.test.aq`` (``trec_eval -m all_trec -q`` on ``qrels.test``/``results.test``,
from usnistgov/trec_eval's test folder, in ``../shared/corpus/trec_eval``) and pytrec_eval
(trec_eval's C code) on random graded qrels and tied scores for other cut-offs and
parameters.
"""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest

from retrieval_lib.cli import main
from retrieval_lib.errors import InputError, UsageError
from retrieval_lib.trec import (
    DEFAULT_CUTOFFS,
    MEASURES,
    TrecRun,
    evaluate,
    format_trec_eval,
    parse_measures,
    read_qrels,
    read_run,
)

REPO = Path(__file__).resolve().parents[2]
TREC_EVAL = REPO / ".." / "shared" / "corpus" / "trec_eval"
ALL_MEASURES = list(MEASURES)

needs_corpus = pytest.mark.skipif(
    not (TREC_EVAL / "out.test.aq").is_file(),
    reason=f"trec_eval's test files are absent ({TREC_EVAL.resolve()})",
)


def _run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _supported(measure: str) -> bool:
    base = re.sub(r"_[0-9.]+$", "", measure)
    return measure in MEASURES or (base in DEFAULT_CUTOFFS and base != measure)


@needs_corpus
def test_q_output_equals_trec_eval_on_every_supported_measure_and_query(capsys):
    expected = [
        line
        for line in (TREC_EVAL / "out.test.aq").read_text().splitlines()
        if _supported(line.split("\t")[0].strip())
    ]
    argv = ["trec-eval", str(TREC_EVAL / "qrels.test"), str(TREC_EVAL / "results.test"), "-q"]
    code, out, err = _run_cli([*argv, *(f"-m{m}" for m in ALL_MEASURES)], capsys)
    assert code == 0, err
    mine = [line for line in out.splitlines() if not line.startswith(("runid", "num_q"))]
    # every supported measure of trec_eval's output, every query and `all`, in its order,
    # byte for byte (padding, tabs, 4 decimals)
    assert len(expected) == 184  # 46 measures x (3 queries + all)
    assert mine == expected
    assert {line.split("\t")[1] for line in mine} == {"301", "302", "303", "all"}
    all_rows = [line for line in out.splitlines() if "\tall\t" in line]
    assert all_rows[:2] == [
        "runid                 \tall\tSTANDARD",
        "num_q                 \tall\t3",
    ]


@needs_corpus
def test_default_measures_equal_trec_evals_default_output(capsys):
    expected = [
        line
        for line in (TREC_EVAL / "out.test").read_text().splitlines()
        if line.split("\t")[0].strip() in {"runid", "num_q"} or _supported(line.split()[0])
    ]
    code, out, _ = _run_cli(
        ["trec-eval", str(TREC_EVAL / "qrels.test"), str(TREC_EVAL / "results.test")], capsys
    )
    assert code == 0
    assert out.splitlines() == expected


@needs_corpus
def test_the_library_call_returns_a_tidy_frame():
    qrels = read_qrels(TREC_EVAL / "qrels.test")
    run = read_run(TREC_EVAL / "results.test")
    result = evaluate(qrels, run, ["map", "P.5"])
    assert list(result.frame.columns) == ["measure", "qid", "value"]
    assert result.n_queries == 3 and result.run_id == "STANDARD"
    rows = result.frame.set_index(["measure", "qid"])["value"]
    assert round(rows["map", "all"], 4) == 0.1785  # out.test
    assert round(rows["P_5", "302"], 4) == 0.8  # out.test.aq


# -- other cut-offs and parameters, graded qrels, ties: pytrec_eval ------------------------

pytrec_eval = pytest.importorskip("pytrec_eval")


def _random_collection(seed: int) -> tuple[dict, dict]:
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(120):
        qid = f"q{q:03d}"
        pool = [f"d{j:03d}" for j in range(rng.randint(1, 80))]
        judged = rng.sample(pool, rng.randint(1, len(pool)))
        grades = [rng.choice([0, 0, 1, 2, 3]) for _ in judged]
        if q % 17 == 0:
            grades = [0 for _ in judged]  # no relevant document
        qrels[qid] = dict(zip(judged, grades, strict=True))
        retrieved = rng.sample(pool, rng.randint(1, len(pool)))
        # few distinct scores: many ties, broken by docno descending
        run[qid] = {doc: float(rng.choice([0.5, 1.0, 1.5, rng.random()])) for doc in retrieved}
    run["q_unjudged"] = {"d001": 1.0}  # not in the qrels: skipped
    qrels["q_not_run"] = {"d001": 1}  # not in the run: not scored (no -c)
    return qrels, run


OTHER_MEASURES = [
    "P.3,7,25",
    "recall.2,50",
    "ndcg_cut.3,17",
    "ndcg",
    "map_cut.4,30",
    "success.2,3",
    "map",
    "Rprec",
    "recip_rank",
    "num_ret",
    "num_rel",
    "num_rel_ret",
]


@pytest.mark.parametrize("level", [1, 2])
def test_other_cutoffs_graded_qrels_and_ties_equal_pytrec_eval(level):
    qrels, run = _random_collection(20261126 + level)
    result = evaluate(qrels, TrecRun(run), OTHER_MEASURES, relevance_level=level)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(OTHER_MEASURES), relevance_level=level)
    reference = evaluator.evaluate(run)
    frame = result.frame
    per_query = frame[frame["qid"] != "all"]
    assert set(per_query["qid"]) == set(reference)
    # q_unjudged is skipped, q_not_run not scored, as trec_eval
    assert "q_unjudged" not in set(per_query["qid"]) and "q_not_run" not in set(per_query["qid"])
    checked = 0
    for measure, qid, value in per_query.itertuples(index=False):
        theirs = reference[qid][measure]
        no_relevant = not any(g >= level for g in qrels[qid].values())
        if no_relevant and measure not in ("num_ret", "num_rel", "num_rel_ret"):
            assert math.isnan(value)  # missing, not 0 (trec_eval prints 0)
            continue
        assert value == pytest.approx(theirs, abs=1e-9), (measure, qid)
        checked += 1
    assert checked > 1500
    # `all`: mean over the scored queries with relevant documents; counts summed
    alls = frame[frame["qid"] == "all"].set_index("measure")["value"]
    scored = [q for q in reference if any(g >= level for g in qrels[q].values())]
    assert alls["P_7"] == pytest.approx(sum(reference[q]["P_7"] for q in scored) / len(scored))
    assert alls["num_ret"] == sum(reference[q]["num_ret"] for q in reference)


def test_measure_names_and_defaults():
    assert [(m.name, m.cutoffs) for m in parse_measures(["success", "P_5", "P.10"])] == [
        ("P", (5, 10)),
        ("success", (1, 5, 10)),
    ]
    with pytest.raises(UsageError, match="unsupported measure 'bpref'; supported: num_ret"):
        parse_measures(["bpref"])
    with pytest.raises(UsageError, match="takes no parameters"):
        parse_measures(["map.5"])
    with pytest.raises(UsageError, match="positive integers"):
        parse_measures(["P.0"])


def test_unsupported_measure_exits_2_with_the_list(tmp_path, capsys):
    qrels, run = tmp_path / "q", tmp_path / "r"
    qrels.write_text("1 0 a 1\n")
    run.write_text("1 Q0 a 1 1.0 t\n")
    code, out, err = _run_cli(["trec-eval", str(qrels), str(run), "-m", "bpref"], capsys)
    assert code == 2 and out == ""
    assert "unsupported measure 'bpref'" in err and "ndcg_cut[.k,...]" in err


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        ("qrels", "q1 0 d1 1\nq1 0 d2\n", r":2: a qrels line has 4 fields"),
        ("qrels", "q1 0 d1 high\n", r":1: relevance must be an integer, got 'high'"),
        ("qrels", "q1 0 d1 1\n\nq1 0 d1 0\n", r":3: 'd1' is judged twice .*line 1"),
        ("run", "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 x t\n", r":2: score must be a number"),
        ("run", "q1 Q0 d1 1 0.5\n", r":1: a run line has 6 fields"),
        ("run", "q1 Q0 d1 1 nan t\n", r":1: score is NaN"),
        ("run", "q1 Q0 d1 1 0.5 t\nq1 Q0 d1 2 0.4 t\n", r":2: 'd1' is retrieved twice"),
    ],
)
def test_malformed_lines_are_named_by_file_and_line(tmp_path, kind, text, message):
    path = tmp_path / kind
    path.write_text(text)
    reader = read_qrels if kind == "qrels" else read_run
    with pytest.raises(InputError, match=re.escape(str(path)) + message):
        reader(path)


def test_a_missing_file_is_one_line_exit_1(tmp_path, capsys):
    code, _, err = _run_cli(["trec-eval", str(tmp_path / "no"), str(tmp_path / "no")], capsys)
    assert code == 1
    assert err.strip().endswith("no such file") and len(err.strip().splitlines()) == 1


def test_rank_column_is_ignored_and_ties_break_by_docno_descending():
    # worked out by hand: scores tie, so the order is c, b, a whatever the rank column says
    run = TrecRun({"q": {"a": 1.0, "b": 1.0, "c": 1.0}})
    result = evaluate({"q": {"a": 1}}, run, ["recip_rank", "P.1"])
    values = dict(zip(result.frame["measure"], result.frame["value"], strict=False))
    assert values["recip_rank"] == pytest.approx(1 / 3)
    assert values["P_1"] == 0.0
    text = format_trec_eval(result, per_query=True)
    assert "recip_rank            \tq\t0.3333" in text.splitlines()
