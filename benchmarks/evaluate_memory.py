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
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_RSS_WRAPPER = (
    "import resource, subprocess, sys\n"
    "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr)\n"
    "print('RSS_KB=%d' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(p.returncode)\n"
)


def _measure(args: list[str], src: str | None, cwd: Path) -> tuple[float, float]:
    """Run ``retrieval-lib ARGS`` (with ``src`` first on PYTHONPATH); CPU s and peak MB.

    Run from ``cwd`` (not the project folder, which ``python -m`` would put first on the
    path, ahead of ``src``)."""
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    before = os.times()
    proc = subprocess.run(
        [sys.executable, "-c", _RSS_WRAPPER, sys.executable, "-m", "retrieval_lib", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
    )
    after = os.times()
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(args)}\n{proc.stderr[-3000:]}")
    rss = int(proc.stdout.rpartition("RSS_KB=")[2].strip()) / 1024
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return cpu, rss


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


def _digest(events_dir: Path) -> str:
    digest = hashlib.sha256()
    for name in ("run_retrieval_summary.json", "retrieval_metrics.parquet"):
        digest.update((events_dir / name).read_bytes())
    return digest.hexdigest()


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
        for label, src in (("reference", args.reference_src), ("this code", None)):
            if label == "reference" and not src:
                continue
            cpu_e, rss_e = _measure(["evaluate", str(events_run)], src, work)
            digest = _digest(events_dir)
            cpu_i, rss_i = _measure(["impact", str(events_run), "--n-boot", "200"], src, work)
            rows.append((label, cpu_e, rss_e, cpu_i, rss_i, digest))
        if len(rows) == 2 and rows[0][5] != rows[1][5]:
            raise SystemExit("the reference and this code wrote different summaries or tables")
        results["rows"] = rows
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{results['documents']:,} documents in one run; load average {os.getloadavg()[0]:.1f}")
    print(f"{'code':<10} {'evaluate CPU s':>15} {'peak MB':>8} {'impact CPU s':>13} {'peak MB':>8}")
    for label, cpu_e, rss_e, cpu_i, rss_i, _ in rows:
        print(f"{label:<10} {cpu_e:>15.1f} {rss_e:>8.0f} {cpu_i:>13.1f} {rss_i:>8.0f}")
    if len(rows) == 2:
        print("summary and table identical: yes")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
