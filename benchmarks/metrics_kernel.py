"""Ranking-metric kernel against pytrec_eval, ranx and the id-conversion floor.

Workload (deterministic, ``--seed``): ``--n`` rankings (default 100,000) of ``--length``
distinct string ids (default 100, file-path-like, ~25 characters), each with 1 to
``--max-relevant`` (default 20) relevant ids drawn from the same 200-id pool, so about half
the relevant ids are retrieved. Inputs are plain Python lists of fresh ``str`` objects, as
``json.loads`` would return them (no string hash is cached before the timed section).

Metric set: P/R/F1/nDCG at 1, 3, 5, 10, AP, RR, Hit@5, R-Prec (20 values per ranking).

Methods, each timed end to end from those lists in its own subprocess, one after another:

* ``kernel``: :func:`retrieval_lib.metrics.ranking.evaluate_rankings`.
* ``pytrec_eval``: build the ``{qid: {doc: grade}}`` qrels and ``{qid: {doc: score}}`` run
  dicts (scores strictly decreasing, so trec_eval keeps the list order), build the
  ``RelevanceEvaluator``, evaluate. F1 is derived from its P and recall afterwards (untimed).
* ``ranx``: ``Qrels.from_dict``, ``Run.from_dict``, ``evaluate``. Its numba JIT warm-up
  (compiling or loading the cache, on a 2-query input) is timed apart and left out.
* ``floor_dense``: only turning ids into a padded ``n x length`` boolean relevance matrix,
  the straightforward way (``[doc in relevant for doc in ranking]`` per row): the floor the
  issue quotes.
* ``floor_tight``: the fastest such conversion we know (``bytes(map(set.__contains__,
  ranking))`` per row, joined): no metric, no duplicate check.

Memory: each subprocess records its resident set size after building the inputs, resets
the peak counter (``/proc/self/clear_refs``), runs the method and reads the new peak
(``VmHWM``); the difference is the method's own peak memory, counted the same way for C++
(pytrec_eval), numba (ranx) and Python/numpy code.

Correctness: the parent compares every metric of every ranking with the kernel's and
reports the largest absolute difference.

Usage::

    .venv/bin/python benchmarks/metrics_kernel.py                    # 100,000 rankings (a few minutes)
    .venv/bin/python benchmarks/metrics_kernel.py --n 20000          # quick run
    .venv/bin/python benchmarks/metrics_kernel.py --methods kernel,floor_dense,pytrec_eval

Prints a table and writes ``benchmarks/out/metrics_kernel.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

CUTOFFS = (1, 3, 5, 10)
METRIC_NAMES = [
    *(f"{family}@{k}" for k in CUTOFFS for family in ("P", "R", "F1", "nDCG")),
    "AP",
    "RR",
    "Hit@5",
    "R-Prec",
]
POOL_SIZE = 200
METHODS = (
    "floor_tight",
    "floor_dense",
    "kernel",
    "pytrec_eval",
    "ranx",
    "kernel_dicts",
    "pytrec_eval_dicts",
    "ranx_dicts",
    "ir_measures_dicts",
)
REFERENCES = (
    "pytrec_eval",
    "ranx",
    "kernel_dicts",
    "pytrec_eval_dicts",
    "ranx_dicts",
    "ir_measures_dicts",
)
#: The score-dict workload: each method starts from the same {qid: {doc: score}} run and
#: {qid: {doc: grade}} qrels dicts (built before the clock starts) and is compared with
#: ``kernel_dicts`` (the project's ``evaluate_queries``).
DICT_METHODS = ("kernel_dicts", "pytrec_eval_dicts", "ranx_dicts", "ir_measures_dicts")
#: Methods whose package is optional (``dev`` extra): left out of the default list when
#: the package is not installed.
OPTIONAL_PACKAGES = {"ir_measures_dicts": "ir_measures"}
OUT_DEFAULT = Path(__file__).resolve().parent / "out" / "metrics_kernel.json"

# Targets of issue 3.
TARGET_US_PER_RANKING = 35.0
TARGET_FLOOR_RATIO = 1.5
TARGET_SPEEDUP = {"pytrec_eval": 2.5, "ranx": 10.0}
# Issues 19 and 20: the score-dict path at least as fast as pytrec_eval on the same dicts.
TARGET_DICT_SPEEDUP = {"pytrec_eval_dicts": 1.0}


# -- workload --------------------------------------------------------------------------------


def make_inputs(
    n: int, length: int, max_relevant: int, seed: int
) -> tuple[list[list[str]], list[list[str]]]:
    """Rankings and relevant lists of fresh string ids (no cached hashes), deterministic."""
    if length > POOL_SIZE:
        raise SystemExit(f"--length must be at most {POOL_SIZE}")
    rng = np.random.default_rng(seed)
    rankings: list[list[str]] = []
    relevant: list[list[str]] = []
    chunk = 5000
    for start in range(0, n, chunk):
        size = min(chunk, n - start)
        order = np.argsort(rng.random((size, POOL_SIZE)), axis=1)
        n_relevant = rng.integers(1, max_relevant + 1, size=size)
        chosen = np.argsort(rng.random((size, POOL_SIZE)), axis=1)
        for row in range(size):
            query = start + row
            prefix = f"src/pkg{query % 97:02d}/q{query}/mod_"
            rankings.append([f"{prefix}{j:03d}.py" for j in order[row, :length].tolist()])
            relevant.append(
                [f"{prefix}{j:03d}.py" for j in chosen[row, : n_relevant[row]].tolist()]
            )
    return rankings, relevant


# -- methods (run inside a worker; return per-metric arrays, time phases on the clock) -------

Values = dict[str, np.ndarray]


class Clock:
    """Wall-clock and CPU time of consecutive phases.

    CPU time (``time.process_time``, all threads of the process) is the robust figure on a
    shared machine: other processes' load inflates wall-clock time but not CPU time.
    """

    def __init__(self) -> None:
        self.phases: dict[str, dict[str, float]] = {}
        self.restart()

    def restart(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def lap(self, phase: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.phases[phase] = {"wall": wall - self._wall, "cpu": cpu - self._cpu}
        self._wall, self._cpu = wall, cpu


def run_kernel(rankings: list[list[str]], relevant: list[list[str]], clock: Clock) -> Values:
    from retrieval_lib.metrics.ranking import evaluate_rankings

    clock.restart()
    scores = evaluate_rankings(rankings, relevant, METRIC_NAMES)
    clock.lap("evaluate_rankings")
    return dict(scores)


def run_floor_dense(rankings: list[list[str]], relevant: list[list[str]], clock: Clock) -> Values:
    clock.restart()
    width = max(map(len, rankings), default=0)
    matrix = np.zeros((len(rankings), width), dtype=bool)
    for row, (ranking, relevant_ids) in enumerate(zip(rankings, relevant, strict=True)):
        relevant_set = set(relevant_ids)
        matrix[row, : len(ranking)] = [doc in relevant_set for doc in ranking]
    n_relevant = np.fromiter(map(len, relevant), dtype=np.int64, count=len(relevant))
    clock.lap("ids_to_matrix")
    del matrix, n_relevant
    return {}


def run_floor_tight(rankings: list[list[str]], relevant: list[list[str]], clock: Clock) -> Values:
    clock.restart()
    parts = [
        bytes(map(set(relevant_ids).__contains__, ranking))
        for ranking, relevant_ids in zip(rankings, relevant, strict=True)
    ]
    flat = np.frombuffer(b"".join(parts), dtype=np.bool_)
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    clock.lap("ids_to_matrix")
    del flat, lengths, parts
    return {}


def _decreasing_scores(ranking: list[str]) -> dict[str, float]:
    top = float(len(ranking))
    return {doc: top - position for position, doc in enumerate(ranking)}


PYTREC_MEASURES = {
    "P_" + ",".join(map(str, CUTOFFS)),
    "recall_" + ",".join(map(str, CUTOFFS)),
    "ndcg_cut_" + ",".join(map(str, CUTOFFS)),
    "map",
    "recip_rank",
    "success_5",
    "Rprec",
}


def run_pytrec_eval(rankings: list[list[str]], relevant: list[list[str]], clock: Clock) -> Values:
    import pytrec_eval

    measures = PYTREC_MEASURES
    qids = [f"q{i}" for i in range(len(rankings))]
    clock.restart()
    qrels = {qid: dict.fromkeys(ids, 1) for qid, ids in zip(qids, relevant, strict=True)}
    run = {qid: _decreasing_scores(ranking) for qid, ranking in zip(qids, rankings, strict=True)}
    clock.lap("build_dicts")
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures)
    clock.lap("RelevanceEvaluator")
    results = evaluator.evaluate(run)
    clock.lap("evaluate")
    return _pytrec_values(results, qids)


def _pytrec_values(results: dict, qids: list[str]) -> Values:
    def column(measure: str) -> np.ndarray:
        return np.array([results[qid][measure] for qid in qids], dtype=np.float64)

    values: Values = {}
    for k in CUTOFFS:
        precision, recall = column(f"P_{k}"), column(f"recall_{k}")
        values[f"P@{k}"], values[f"R@{k}"] = precision, recall
        total = precision + recall
        values[f"F1@{k}"] = np.divide(
            2 * precision * recall, total, out=np.zeros_like(total), where=total > 0
        )
        values[f"nDCG@{k}"] = column(f"ndcg_cut_{k}")
    values |= {
        "AP": column("map"),
        "RR": column("recip_rank"),
        "Hit@5": column("success_5"),
        "R-Prec": column("Rprec"),
    }
    return values


RANX_NAMES = {
    **{f"P@{k}": f"precision@{k}" for k in CUTOFFS},
    **{f"R@{k}": f"recall@{k}" for k in CUTOFFS},
    **{f"F1@{k}": f"f1@{k}" for k in CUTOFFS},
    **{f"nDCG@{k}": f"ndcg@{k}" for k in CUTOFFS},
    "AP": "map",
    "RR": "mrr",
    "Hit@5": "hit_rate@5",
    "R-Prec": "r-precision",
}


def warm_up_ranx(rankings: list[list[str]], relevant: list[list[str]]) -> float:
    """Compile (or load from numba's cache) everything ranx runs; return seconds.

    ranx stores ids as numpy ``<U{longest id}`` arrays and numba compiles one version per
    string width, so the warm-up ids have the same widths as the real qrels and run.
    """
    import ranx

    run_width = max(len(doc) for ranking in rankings for doc in ranking)
    qrels_width = max(len(doc) for ids in relevant for doc in ids)
    a, b = "a".ljust(run_width, "_"), "b".ljust(run_width, "_")
    start = time.perf_counter()
    qrels = ranx.Qrels.from_dict(
        {"q0": {"a".ljust(qrels_width, "_"): 1}, "q1": {"b".ljust(qrels_width, "_"): 1}}
    )
    run = ranx.Run.from_dict({"q0": {a: 2.0, b: 1.0}, "q1": {a: 2.0, b: 1.0}})
    ranx.evaluate(qrels, run, list(RANX_NAMES.values()))
    return time.perf_counter() - start


def run_ranx(rankings: list[list[str]], relevant: list[list[str]], clock: Clock) -> Values:
    import ranx

    qids = [f"q{i}" for i in range(len(rankings))]
    clock.restart()
    qrels = ranx.Qrels.from_dict(
        {qid: dict.fromkeys(ids, 1) for qid, ids in zip(qids, relevant, strict=True)}
    )
    run = ranx.Run.from_dict(
        {qid: _decreasing_scores(ranking) for qid, ranking in zip(qids, rankings, strict=True)}
    )
    clock.lap("build_qrels_and_run")
    ranx.evaluate(qrels, run, list(RANX_NAMES.values()))
    clock.lap("evaluate")
    return {
        name: np.array([run.scores[metric][qid] for qid in qids], dtype=np.float64)
        for name, metric in RANX_NAMES.items()
    }


# -- the score-dict workload: the same dicts for every method --------------------------------

Dicts = tuple[list[str], dict[str, dict[str, float]], dict[str, dict[str, int]]]


def make_dicts(rankings: list[list[str]], relevant: list[list[str]]) -> Dicts:
    """``{qid: {doc: score}}`` (strictly decreasing float scores, so the order is the list's:
    no ties) and ``{qid: {doc: 1}}``, as a user of ranx or pytrec_eval holds them."""
    qids = [f"q{i}" for i in range(len(rankings))]
    run = {qid: _decreasing_scores(ranking) for qid, ranking in zip(qids, rankings, strict=True)}
    qrels = {qid: dict.fromkeys(ids, 1) for qid, ids in zip(qids, relevant, strict=True)}
    return qids, run, qrels


def run_kernel_dicts(dicts: Dicts, clock: Clock) -> Values:
    from retrieval_lib.metrics.ranking import evaluate_queries

    _, run, qrels = dicts
    clock.restart()
    scores = evaluate_queries(run, qrels, METRIC_NAMES)
    clock.lap("evaluate_queries")
    return dict(scores.rankings)


def run_pytrec_eval_dicts(dicts: Dicts, clock: Clock) -> Values:
    import pytrec_eval

    qids, run, qrels = dicts
    clock.restart()
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES)
    clock.lap("RelevanceEvaluator")
    results = evaluator.evaluate(run)
    clock.lap("evaluate")
    return _pytrec_values(results, qids)


def run_ranx_dicts(dicts: Dicts, clock: Clock) -> Values:
    import ranx

    qids, run_dict, qrels_dict = dicts
    clock.restart()
    qrels = ranx.Qrels.from_dict(qrels_dict)
    run = ranx.Run.from_dict(run_dict)
    clock.lap("from_dict")
    ranx.evaluate(qrels, run, list(RANX_NAMES.values()))
    clock.lap("evaluate")
    return {
        name: np.array([run.scores[metric][qid] for qid in qids], dtype=np.float64)
        for name, metric in RANX_NAMES.items()
    }


#: ir_measures' names of the metrics it has (F1 is derived from P and R, as for pytrec_eval).
IR_MEASURES_NAMES = {
    **{f"P@{k}": f"P@{k}" for k in CUTOFFS},
    **{f"R@{k}": f"R@{k}" for k in CUTOFFS},
    **{f"nDCG@{k}": f"nDCG@{k}" for k in CUTOFFS},
    "AP": "AP",
    "RR": "RR",
    "Hit@5": "Success@5",
    "R-Prec": "Rprec",
}


def run_ir_measures_dicts(dicts: Dicts, clock: Clock) -> Values:
    import ir_measures

    qids, run, qrels = dicts
    clock.restart()
    measures = [ir_measures.parse_measure(name) for name in IR_MEASURES_NAMES.values()]
    clock.lap("parse_measure")
    found = {
        (m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures, qrels, run)
    }
    clock.lap("iter_calc")
    values: Values = {
        name: np.array([found[(qid, measure)] for qid in qids], dtype=np.float64)
        for name, measure in IR_MEASURES_NAMES.items()
    }
    for k in CUTOFFS:
        precision, recall = values[f"P@{k}"], values[f"R@{k}"]
        total = precision + recall
        values[f"F1@{k}"] = np.divide(
            2 * precision * recall, total, out=np.zeros_like(total), where=total > 0
        )
    return values


DICT_RUNNERS: dict[str, Callable[[Dicts, Clock], Values]] = {
    "kernel_dicts": run_kernel_dicts,
    "pytrec_eval_dicts": run_pytrec_eval_dicts,
    "ranx_dicts": run_ranx_dicts,
    "ir_measures_dicts": run_ir_measures_dicts,
}


RUNNERS: dict[str, Callable[[list[list[str]], list[list[str]], Clock], Values]] = {
    "kernel": run_kernel,
    "floor_dense": run_floor_dense,
    "floor_tight": run_floor_tight,
    "pytrec_eval": run_pytrec_eval,
    "ranx": run_ranx,
}


# -- worker ----------------------------------------------------------------------------------


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def worker(args: argparse.Namespace) -> None:
    """Build the inputs, run one method, print a JSON line, save its values."""
    warnings.simplefilter("ignore")  # numba's unsafe-cast notices inside ranx
    method = args.worker
    started = time.perf_counter()
    rankings, relevant = make_inputs(args.n, args.length, args.max_relevant, args.seed)
    report: dict[str, object] = {"input_seconds": time.perf_counter() - started}
    if method in ("ranx", "ranx_dicts"):
        report["jit_warmup_seconds"] = warm_up_ranx(rankings, relevant)
    dicts = make_dicts(rankings, relevant) if method in DICT_METHODS else None
    if dicts is not None:
        del rankings, relevant
    gc.collect()
    rss_before = _status_kb("VmRSS")
    peak_reset = _reset_peak_rss()
    clock = Clock()
    if dicts is not None:
        values = DICT_RUNNERS[method](dicts, clock)
    else:
        values = RUNNERS[method](rankings, relevant, clock)
    peak = _status_kb("VmHWM")
    report |= {
        "method": method,
        "phases_seconds": clock.phases,
        "wall_seconds": sum(phase["wall"] for phase in clock.phases.values()),
        "cpu_seconds": sum(phase["cpu"] for phase in clock.phases.values()),
        "rss_inputs_mb": rss_before / 1024,
        "peak_extra_mb": (peak - rss_before) / 1024 if peak_reset else None,
        "memory_method": "VmHWM after clear_refs" if peak_reset else "unavailable",
    }
    if values:
        np.savez(args.values, **{name: values[name] for name in METRIC_NAMES})
    print(json.dumps(report))


def spawn(method: str, args: argparse.Namespace, values_path: Path) -> dict:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        method,
        "--values",
        str(values_path),
        "--n",
        str(args.n),
        "--length",
        str(args.length),
        "--max-relevant",
        str(args.max_relevant),
        "--seed",
        str(args.seed),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{method} worker failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- parent ----------------------------------------------------------------------------------


def _max_abs_diff(kernel: Path, other: Path) -> dict[str, float]:
    with np.load(kernel) as mine, np.load(other) as theirs:
        return {name: float(np.max(np.abs(mine[name] - theirs[name]))) for name in METRIC_NAMES}


CLOCKS = ("cpu", "wall")


def _summarise(runs: list[dict], n: int) -> dict:
    """Median over runs of each clock's total and phases, in µs per ranking; worst peak."""
    peaks = [run["peak_extra_mb"] for run in runs if run["peak_extra_mb"] is not None]
    summary: dict = {"runs": runs, "peak_extra_mb": max(peaks) if peaks else None}
    for clock in CLOCKS:
        summary[f"{clock}_us_per_ranking"] = (
            statistics.median(run[f"{clock}_seconds"] for run in runs) / n * 1e6
        )
        summary[f"{clock}_phases_us_per_ranking"] = {
            phase: statistics.median(run["phases_seconds"][phase][clock] for run in runs) / n * 1e6
            for phase in runs[0]["phases_seconds"]
        }
    if "jit_warmup_seconds" in runs[0]:
        summary["jit_warmup_seconds"] = statistics.median(r["jit_warmup_seconds"] for r in runs)
    return summary


def _ratio_text(method: str, us: float, kernel_us: float | None) -> str:
    if kernel_us is None or method in ("kernel", "kernel_dicts"):
        return "-"
    if method.startswith("floor"):
        return f"{kernel_us / us:.2f}x it"
    return f"{us / kernel_us:.1f}x faster"


def _format_table(results: dict, n: int) -> str:
    methods = results["methods"]
    kernel = methods.get("kernel", {})
    lines = [
        f"{n:,} rankings x {results['workload']['length']} ids, "
        f"{len(METRIC_NAMES)} metrics ({', '.join(METRIC_NAMES)})",
        f"load average at start / end: {results['environment']['load_average_at_start'][0]:.1f}"
        f" / {results['environment']['load_average_at_end'][0]:.1f} "
        f"on {results['environment']['cpu_count']} CPUs",
        "",
        f"{'method':<13}{'CPU us':>9}{'kernel is':>14}{'wall us':>9}{'kernel is':>14}"
        f"{'peak MB':>9}  CPU phases (us/ranking)",
    ]
    for method, summary in methods.items():
        # the score-dict workload is compared with the project's score-dict path
        base = methods.get("kernel_dicts", {}) if method in DICT_METHODS else kernel
        cells = []
        for clock in CLOCKS:
            us = summary[f"{clock}_us_per_ranking"]
            cells.append(
                f"{us:9.2f}{_ratio_text(method, us, base.get(f'{clock}_us_per_ranking')):>14}"
            )
        peak = summary["peak_extra_mb"]
        peak_text = f"{peak:9.1f}" if peak is not None else f"{'n/a':>9}"
        phases = ", ".join(f"{k} {v:.1f}" for k, v in summary["cpu_phases_us_per_ranking"].items())
        if "jit_warmup_seconds" in summary:
            phases += f"; JIT warm-up {summary['jit_warmup_seconds']:.1f} s wall (not counted)"
        lines.append(f"{method:<13}{''.join(cells)}{peak_text}  {phases}")
    if results["max_abs_diff"]:
        lines.append("")
        for reference, diffs in results["max_abs_diff"].items():
            worst = max(diffs, key=diffs.get)
            lines.append(
                f"max |kernel - {reference}| over all metrics and rankings: "
                f"{diffs[worst]:.3g} ({worst})"
            )
    if results["targets"]:
        lines.append("")
        for target, outcome in results["targets"].items():
            verdicts = ", ".join(
                f"{clock} {'met' if outcome[clock]['met'] else 'NOT met'} ({outcome[clock]['value']})"
                for clock in (*CLOCKS, "memory")
                if clock in outcome
            )
            lines.append(f"target {target}: {verdicts}")
    return "\n".join(lines)


def _targets(methods: dict) -> dict:
    """Issue 3's targets (and issue 19/20's score-dict one), on CPU and wall-clock time apart."""
    targets: dict[str, dict] = {}

    def check(name: str, clock: str, met: bool, value: str) -> None:
        targets.setdefault(name, {})[clock] = {"met": met, "value": value}

    if "kernel_dicts" in methods:
        mine_dicts = methods["kernel_dicts"]
        for clock in CLOCKS:
            us = mine_dicts[f"{clock}_us_per_ranking"]
            for reference, wanted in TARGET_DICT_SPEEDUP.items():
                if reference in methods:
                    speedup = methods[reference][f"{clock}_us_per_ranking"] / us
                    check(
                        f"score dicts: >= {wanted}x the speed of {reference}",
                        clock,
                        speedup >= wanted,
                        f"{speedup:.2f}x",
                    )
    if "kernel" not in methods:
        return targets
    kernel = methods["kernel"]

    for clock in CLOCKS:
        us = kernel[f"{clock}_us_per_ranking"]
        check(
            f"<= {TARGET_US_PER_RANKING} us per ranking",
            clock,
            us <= TARGET_US_PER_RANKING,
            f"{us:.2f} us",
        )
        for floor in ("floor_dense", "floor_tight"):
            if floor in methods:
                ratio = us / methods[floor][f"{clock}_us_per_ranking"]
                check(
                    f"within {TARGET_FLOOR_RATIO}x of {floor}",
                    clock,
                    ratio <= TARGET_FLOOR_RATIO,
                    f"{ratio:.2f}x",
                )
        for reference, wanted in TARGET_SPEEDUP.items():
            if reference in methods:
                speedup = methods[reference][f"{clock}_us_per_ranking"] / us
                check(
                    f">= {wanted}x faster than {reference}",
                    clock,
                    speedup >= wanted,
                    f"{speedup:.1f}x",
                )
    if "pytrec_eval" in methods and kernel["peak_extra_mb"] is not None:
        mine, theirs = kernel["peak_extra_mb"], methods["pytrec_eval"]["peak_extra_mb"]
        check(
            "peak memory <= pytrec_eval's",
            "memory",
            mine <= theirs,
            f"{mine:.1f} MB vs {theirs:.1f} MB",
        )
    return targets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="number of rankings")
    parser.add_argument("--length", type=int, default=100, help="ids per ranking (<= 200)")
    parser.add_argument("--max-relevant", type=int, default=20, help="relevant ids: 1..this")
    parser.add_argument("--seed", type=int, default=0)
    import importlib.util

    available = [
        m
        for m in METHODS
        if m not in OPTIONAL_PACKAGES or importlib.util.find_spec(OPTIONAL_PACKAGES[m])
    ]
    parser.add_argument(
        "--methods",
        default=",".join(available),
        help=f"comma-separated subset of {METHODS} (default: those installed)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of the kernel and floors (median kept)"
    )
    parser.add_argument(
        "--reference-repeats", type=int, default=1, help="runs of pytrec_eval and ranx"
    )
    parser.add_argument("--out", type=Path, default=OUT_DEFAULT, help="JSON results file")
    parser.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    parser.add_argument("--values", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return 0

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        parser.error(f"unknown methods {unknown}; choose from {METHODS}")
    results: dict = {
        "workload": {
            "n_rankings": args.n,
            "length": args.length,
            "relevant_per_ranking": [1, args.max_relevant],
            "pool_per_ranking": POOL_SIZE,
            "seed": args.seed,
            "metrics": METRIC_NAMES,
        },
        "environment": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "load_average_at_start": list(os.getloadavg()),
        },
        "methods": {},
        "max_abs_diff": {},
    }
    with tempfile.TemporaryDirectory(prefix="metrics_kernel_") as tmp:
        values_of: dict[str, Path] = {}
        for method in methods:
            repeats = args.reference_repeats if method in REFERENCES else args.repeats
            values_of[method] = Path(tmp) / f"{method}.npz"
            runs = []
            for attempt in range(repeats):
                print(f"running {method} ({attempt + 1}/{repeats})...", file=sys.stderr)
                runs.append(spawn(method, args, values_of[method]))
            results["methods"][method] = _summarise(runs, args.n)
        # every method's values against the kernel's (the list workload), or against the
        # score-dict path when the kernel did not run
        base = next((m for m in ("kernel", "kernel_dicts") if m in methods), None)
        if base is not None:
            for reference in REFERENCES:
                if reference in methods and reference != base:
                    results["max_abs_diff"][reference] = _max_abs_diff(
                        values_of[base], values_of[reference]
                    )
    results["environment"]["load_average_at_end"] = list(os.getloadavg())
    results["targets"] = _targets(results["methods"])

    print(_format_table(results, args.n))
    from retrieval_lib.io import atomic_write_text, dumps_json

    atomic_write_text(args.out, dumps_json(results))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
