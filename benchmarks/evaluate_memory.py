"""Peak memory of ``evaluate`` and ``impact`` on one run of many trials (issue 20).

Builds one batch-layout run of ``--trials`` trials: the trials of a synthetic run
(``retrieval_lib.synth``, bench scale, natural-size traces of ~68 KB) hard-linked again
and again into the same run under new trial names (repeated trials of the same tasks),
normalises it once, then runs ``retrieval-lib evaluate`` and ``retrieval-lib impact`` on
it, each in a fresh process whose peak RSS (``ru_maxrss`` of the child) is reported.

The reference in the same run: ``--reference-src DIR`` runs the same two commands with
another source tree first on ``PYTHONPATH`` (e.g. main before issue 20, extracted with
``git archive <commit> retrieval_lib | tar -x -C DIR``); both evaluations must write the
same summary and table (SHA-256 compared, else the benchmark fails).

Usage::

    .venv/bin/python benchmarks/evaluate_memory.py --trials 10000 --reference-src /tmp/old
    .venv/bin/python benchmarks/evaluate_memory.py --trials 30000 --workdir /tmp/em
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _measure import RSS_WRAPPER, process_tree

ROOT = Path(__file__).resolve().parents[1]


def _measure(args: list[str], src: str | None, cwd: Path) -> tuple[float, float, float]:
    """Run ``retrieval-lib ARGS`` (with ``src`` first on PYTHONPATH): CPU s, peak MB of
    the command's process (``ru_maxrss``) and peak MB of its whole process tree (the
    sum of VmRSS over the tree, sampled from /proc every 50 ms).

    Run from ``cwd`` (not the project folder, which ``python -m`` would put first on the
    path, ahead of ``src``)."""
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    before = os.times()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", RSS_WRAPPER, sys.executable, "-m", "retrieval_lib", *args],
            stdout=out,
            stderr=err,
            text=True,
            env=env,
            cwd=cwd,
        )
        tree = 0.0
        while proc.poll() is None:
            # the wrapper itself (a small Python) is left out: the command's tree only
            sizes = process_tree(proc.pid)
            tree = max(tree, sum(rss for pid, (rss, _) in sizes.items() if pid != proc.pid) / 2**20)
            time.sleep(0.05)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    after = os.times()
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(args)}\n{stderr[-3000:]}")
    rss = int(stdout.rpartition("RSS_KB=")[2].strip()) / 1024
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return cpu, rss, max(tree, rss)


def _build_run(work: Path, trials: int, seed: int) -> Path:
    from retrieval_lib.runs import discover_runs, discover_trials
    from retrieval_lib.synth import generate_runs

    base = work / "base"
    generate_runs(base, n_tasks=44, seed=seed, scale="bench")
    run = next(r for r in discover_runs([base / "runs"]) if "archive" not in str(r))
    found = discover_trials(run)
    copy = 0
    made = len(found)
    while made < trials:
        copy += 1
        for trial in found:
            if made >= trials:
                break
            name = trial.trial_dir.name.rsplit("__", 1)[0]
            target = trial.trial_dir.parent / f"{name}__r{copy:06d}"
            shutil.copytree(trial.trial_dir, target, copy_function=os.link)
            made += 1
    return run


_OUTPUTS = ("run_retrieval_summary.json", "retrieval_metrics.parquet", "retrieval_impact.json")


def _keep_outputs(events_dir: Path, into: Path) -> Path:
    """Copy what evaluate and impact wrote (summary, table, dataset, impact) aside."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    for name in _OUTPUTS:
        shutil.copy2(events_dir / name, into / name)
    shutil.copytree(events_dir / "retrieval_metrics_dataset", into / "retrieval_metrics_dataset")
    return into


def _compare(reference: Path, current: Path) -> str:
    """ "bytes" when every output is byte-identical; "content" when only Parquet files
    differ and hold equal frames and schemas (a table longer than a row group); else
    the SystemExit of a difference."""
    import pandas as pd
    import pyarrow.parquet as pq

    files = sorted(p.relative_to(reference) for p in reference.rglob("*") if p.is_file())
    got = sorted(p.relative_to(current) for p in current.rglob("*") if p.is_file())
    if files != got:
        raise SystemExit(f"different outputs: {files} vs {got}")
    verdict = "bytes"
    for name in files:
        a, b = (reference / name).read_bytes(), (current / name).read_bytes()
        if a == b:
            continue
        if name.suffix != ".parquet":
            raise SystemExit(f"{name} differs between the reference and this code")
        same_schema = pq.read_schema(reference / name).equals(
            pq.read_schema(current / name), check_metadata=True
        )
        pd.testing.assert_frame_equal(
            pd.read_parquet(reference / name), pd.read_parquet(current / name)
        )
        if not same_schema:
            raise SystemExit(f"{name}: the schemas differ")
        verdict = "content"
    return verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", help="keep the generated data here (reused when present)")
    parser.add_argument("--reference-src", help="source tree of the reference (old) code")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "out" / "evaluate_memory.json"
    )
    args = parser.parse_args(argv)

    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="rl-em-"))
    results: dict[str, object] = {"trials_requested": args.trials}
    try:
        out = work / f"out-{args.trials}"
        if not out.is_dir():
            t0 = time.perf_counter()
            run = _build_run(work / f"data-{args.trials}", args.trials, args.seed)
            tasks = work / f"data-{args.trials}" / "base" / "benchmarks"
            _measure(
                [
                    "normalize",
                    str(run),
                    "--tasks-root",
                    str(tasks),
                    "--out",
                    str(out),
                    "--workers",
                    "2",
                    "--quiet",
                ],
                None,
                work,
            )
            results["prepare_seconds"] = time.perf_counter() - t0
        events_run = next(out.iterdir())
        events_dir = events_run / "retrieval_events"
        results["documents"] = sum(1 for _ in events_dir.rglob("*.retrieval_events.json"))
        rows = []
        kept = []
        for label, src in (("reference", args.reference_src), ("this code", None)):
            if label == "reference" and not src:
                continue
            cpu_e, rss_e, tree_e = _measure(["evaluate", str(events_run)], src, work)
            cpu_i, rss_i, tree_i = _measure(
                ["impact", str(events_run), "--n-boot", "200"], src, work
            )
            rows.append((label, cpu_e, rss_e, tree_e, cpu_i, rss_i, tree_i))
            kept.append(_keep_outputs(events_dir, work / f"kept-{args.trials}-{len(kept)}"))
        if len(kept) == 2:
            results["identical"] = _compare(kept[0], kept[1])
        results["rows"] = rows
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{results['documents']:,} documents in one run; load average {os.getloadavg()[0]:.1f}")
    print(
        f"{'code':<10} {'evaluate CPU s':>15} {'peak MB':>8} {'tree MB':>8}"
        f" {'impact CPU s':>13} {'peak MB':>8} {'tree MB':>8}"
    )
    for label, cpu_e, rss_e, tree_e, cpu_i, rss_i, tree_i in rows:
        print(
            f"{label:<10} {cpu_e:>15.1f} {rss_e:>8.0f} {tree_e:>8.0f}"
            f" {cpu_i:>13.1f} {rss_i:>8.0f} {tree_i:>8.0f}"
        )
    if "identical" in results:
        print(
            "summary, table, dataset and impact JSON identical: "
            + (
                "byte for byte"
                if results["identical"] == "bytes"
                else "same content (Parquet "
                "row groups differ: the table is longer than a row group)"
            )
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
