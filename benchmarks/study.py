"""A study of many synthetic trials from raw run folders to HTML: time and memory.

Generates runs in the real layout (``retrieval_lib.synth``: ``--runs`` batch runs over the
same tasks plus one archived run, about ``15.1 x --tasks`` trials), then measures:

* ``retrieval-lib study RUNS --tasks-root TASKS --out OUT --workers W`` in a subprocess,
  from raw folders to ``study.html`` (normalise, evaluate, pool, tables, notebook, HTML):
  wall time, and peak memory of the whole process tree (the CLI, its normalisation and
  evaluation workers and the notebook kernel), sampled from /proc every 50 ms;
* the same command again, with every run up to date (reused): the cost of pooling and
  rendering alone; the difference is normalisation and evaluation;
* the reference in the same run: reading every trace file and decoding its JSON with the
  standard library (the least any tool must do with these inputs), in CPU seconds.

Usage::

    python benchmarks/study.py                      # ~10,000 trials over 10 runs
    python benchmarks/study.py --tasks 66 --quick   # ~1,000 trials

Results are printed and written to ``benchmarks/out/study.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _tree_rss_mb(root_pid: int) -> tuple[float, float]:
    """(total, largest) resident memory in MB of ``root_pid`` and its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            ppid, pages = int(fields[1]), int(fields[21])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = pages * os.sysconf("SC_PAGE_SIZE")
    todo, seen = [root_pid], []
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo.extend(children.get(pid, []))
    sizes = [rss.get(pid, 0) for pid in seen]
    return sum(sizes) / 1e6, max(sizes, default=0) / 1e6


def _measure(cmd: list[str]) -> dict[str, float | str]:
    """Run ``cmd``; wall seconds, peak tree and single-process RSS, and its output."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peaks = [0.0, 0.0]

    def sample() -> None:
        while proc.poll() is None:
            total, largest = _tree_rss_mb(proc.pid)
            peaks[0], peaks[1] = max(peaks[0], total), max(peaks[1], largest)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = proc.communicate()
    seconds = time.perf_counter() - start
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{output[-3000:]}")
    return {
        "seconds": seconds,
        "peak_tree_mb": peaks[0],
        "peak_process_mb": peaks[1],
        "output": output,
    }


def _decode_reference(runs: Path) -> tuple[float, int, float]:
    """CPU seconds to read and json-decode every trace; (seconds, files, MB)."""
    names = ("trajectory.json", "claude-code.txt", "stdout.txt")
    files = [p for p in runs.rglob("*") if p.name in names]
    start = time.process_time()
    size = 0
    for path in files:
        data = path.read_bytes()
        size += len(data)
        if path.name == "trajectory.json":
            json.loads(data)
            continue
        for line in data.split(b"\n"):
            if line.startswith(b"{"):
                with contextlib.suppress(ValueError):
                    json.loads(line)
    return time.process_time() - start, len(files), size / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks", type=int, default=663, help="tasks (default 663: ~10,000 trials)"
    )
    parser.add_argument("--runs", type=int, default=9, help="batch runs (plus one archived)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "out" / "study")
    parser.add_argument("--quick", action="store_true", help="keep the generated runs if present")
    args = parser.parse_args()

    from retrieval_lib.synth import generate_runs

    data, out = args.out / "data", args.out / "reports"
    manifest = data / "synth_manifest.json"
    started = time.perf_counter()
    if not (args.quick and manifest.is_file()):
        generate_runs(data, n_tasks=args.tasks, n_runs=args.runs, scale="bench")
    generated = time.perf_counter() - started
    from retrieval_lib.runs import discover_runs, discover_trials

    trials = sum(len(discover_trials(run)) for run in discover_runs([data / "runs"]))
    shutil.rmtree(out, ignore_errors=True)
    cli = [
        sys.executable,
        "-m",
        "retrieval_lib",
        "study",
        str(data / "runs"),
        "--tasks-root",
        str(data / "benchmarks"),
        "--out",
        str(out),
        "--workers",
        str(args.workers),
    ]
    cold = _measure(cli)
    warm = _measure(cli)
    reference, n_files, trace_mb = _decode_reference(data / "runs")
    html = out / "study" / "study.html"
    result = {
        "trials": trials,
        "runs": args.runs + 1,
        "trace_files": n_files,
        "trace_mb": round(trace_mb, 1),
        "generate_seconds": round(generated, 1),
        "workers": args.workers,
        "cold_seconds": round(float(cold["seconds"]), 1),
        "cold_peak_tree_mb": round(float(cold["peak_tree_mb"])),
        "cold_peak_process_mb": round(float(cold["peak_process_mb"])),
        "warm_seconds": round(float(warm["seconds"]), 1),
        "warm_peak_tree_mb": round(float(warm["peak_tree_mb"])),
        "normalise_and_evaluate_seconds": round(float(cold["seconds"]) - float(warm["seconds"]), 1),
        "reference_decode_cpu_seconds": round(reference, 2),
        "cold_over_reference": round(float(cold["seconds"]) / reference, 1) if reference else None,
        "html_mb": round(html.stat().st_size / 1e6, 2),
        "load_average": os.getloadavg(),
        "cold_output_tail": str(cold["output"]).splitlines()[-3:],
    }
    (HERE / "out").mkdir(exist_ok=True)
    (HERE / "out" / "study.json").write_text(json.dumps(result, indent=2) + "\n")
    for key, value in result.items():
        print(f"{key:32} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
