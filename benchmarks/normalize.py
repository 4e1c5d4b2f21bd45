"""Normalisation throughput, start-up time and memory on generated runs of realistic size.

Generates synthetic runs in the real layout (``retrieval_lib.synth``), then measures:

* in-process normalisation with one worker: trials/s and MB/s of trace input per core;
* the reference in the same run: merely reading the trace files and decoding every JSON
  line/document with the standard library (``json.loads``), i.e. the work any parser must
  do at least, and the same with ``orjson`` (the floor);
* the whole ``retrieval-lib normalize`` command in a subprocess (start-up included), its
  peak RSS, and the peak RSS for half as many trials (memory must not grow with trials);
* the CLI's start-up (``retrieval-lib --version``) and which heavy modules it imports.

Usage::

    .venv/bin/python benchmarks/normalize.py                       # default: ~1000 trials, ~0.5 MB traces
    .venv/bin/python benchmarks/normalize.py --tasks 20 --trace-mb 5   # several-MB transcripts
    .venv/bin/python benchmarks/normalize.py --tasks 50 --quick
    .venv/bin/python benchmarks/normalize.py --tasks 300 --trace-mb 0 --quick --uncached
        # natural-size traces (~68 KB, no padding): per-trial cost against read + orjson,
        # and the same normalisation with ground truth re-read for every trial (issue 20)
    .venv/bin/python benchmarks/normalize.py --tasks 300 --trace-mb 0 --quick \
        --reference-src /tmp/old --repeats 5
        # the same warm per-trial cost of another source tree (e.g. ``git archive <commit>
        # retrieval_lib | tar -x -C /tmp/old``), interleaved with this code's in fresh
        # processes, each against the read + orjson floor measured beside it; the least
        # of the repeats is kept for each (a shared machine only ever adds time)

Results are printed as a table and written to ``benchmarks/out/normalize.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _measure import RSS_WRAPPER

HEAVY_MODULES = ("scipy", "pingouin", "matplotlib", "seaborn", "papermill", "pandas")


def _trace_files(runs: Path) -> list[Path]:
    names = ("trajectory.json", "claude-code.txt", "stdout.txt")
    return sorted(
        p for p in runs.rglob("*") if p.name in names and p.parent.name in ("agent", "command-1")
    )


def _decode_reference(files: list[Path], loads) -> float:
    """Read every trace and decode each JSON line/document; return CPU seconds."""
    start = time.process_time()
    for path in files:
        data = path.read_bytes()
        if path.name == "trajectory.json":
            loads(data)
            continue
        for line in data.split(b"\n"):
            if line.startswith(b"{"):
                with contextlib.suppress(ValueError):
                    loads(line)
    return time.process_time() - start


# Child of --reference-src / --repeats: one warm pass, then the floor and a timed pass, each
# into a folder of its own under ``out`` (see _Outputs).
_WARM_CHILD = """
import json, shutil, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import orjson
from normalize import _decode_reference, _trace_files
from retrieval_lib.normalize import normalize_paths
runs, tasks, out = Path(sys.argv[3]), Path(sys.argv[4]), Path(sys.argv[5])
normalize_paths([runs], tasks, out=out / "warm", workers=1)
files = _trace_files(runs)
floor = _decode_reference(files, orjson.loads)
cpu0 = time.process_time()
report = normalize_paths([runs], tasks, out=out / "timed", workers=1)
cpu = time.process_time() - cpu0
print(json.dumps({"cpu": cpu, "floor": floor, "trials": report.trials}))
"""


def _warm_pass(src: Path, runs: Path, tasks: Path, out: Path) -> dict[str, float]:
    """Warm per-trial CPU of the code under ``src`` and the floor, in a fresh process."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _WARM_CHILD,
            str(src),
            str(Path(__file__).resolve().parent),
            str(runs),
            str(tasks),
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=src,
    )
    if proc.returncode != 0:
        raise SystemExit(f"warm pass under {src} failed:\n{proc.stderr}")
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        "ms": found["cpu"] / found["trials"] * 1e3,
        "floor_ms": found["floor"] / found["trials"] * 1e3,
    }


class _Outputs:
    """Output folders for the passes: each pass gets one never used before, and all are
    removed together at the end.

    On this project's 2-core VM (ext4), creating a file cost 0.015 ms in one folder and
    0.2-0.8 ms of system time in another of the same file system, the worst next to many
    files deleted moments before: passes that deleted and rewrote one output folder measured
    the disk's inode allocator more than normalisation (1.75 ms per trial against 0.78 ms).
    The folders sit on tmpfs (/dev/shm) where there is one, so the figure is the code's;
    ``--out-dir`` puts them elsewhere (e.g. beside the runs, as a user would).
    """

    def __init__(self, parent: Path) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="rl-bench-out-", dir=parent))
        self._made = 0

    def fresh(self, label: str) -> Path:
        self._made += 1
        return self.root / f"{self._made:02d}-{label}"


def _io_floor(files: list[Path], documents_root: Path, scratch: Path) -> float:
    """CPU seconds of the I/O every normaliser of this layout does, without any of its
    logic: the read + orjson floor, reading and decoding each trial's ``result.json``, and
    serialising and atomically writing each document (the documents under
    ``documents_root``, decoded before the clock starts, written to ``scratch``)."""
    import orjson

    from retrieval_lib.events.document import DOCUMENT_SUFFIX, dumps_document
    from retrieval_lib.io import atomic_write_bytes

    docs = [
        orjson.loads(p.read_bytes()) for p in sorted(documents_root.rglob("*" + DOCUMENT_SUFFIX))
    ]
    trials = sorted({p.parents[2] if p.parent.name == "command-1" else p.parents[1] for p in files})
    results = [t / "result.json" for t in trials if (t / "result.json").is_file()]
    start = time.process_time()
    _decode_reference(files, orjson.loads)
    for path in results:
        orjson.loads(path.read_bytes())
    for i, doc in enumerate(docs):
        atomic_write_bytes(scratch / f"{i}{DOCUMENT_SUFFIX}", dumps_document(doc))
    return time.process_time() - start


def _child_rss_mb(cmd: list[str]) -> tuple[float, float, str]:
    """Run ``cmd``; return (seconds, peak RSS of the child in MB, stdout)."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", RSS_WRAPPER, *cmd], capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"command failed: {' '.join(cmd)}\n{proc.stderr}")
    out, _, rss = proc.stdout.rpartition("RSS_KB=")
    return seconds, int(rss.strip()) / 1024, out


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "retrieval_lib", *args]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tasks", type=int, default=500, help="synthetic tasks (about 2 trials each)"
    )
    parser.add_argument(
        "--trace-mb",
        type=float,
        default=0.5,
        help="target size of each trace in MB (0: natural size, ~68 KB, no padding)",
    )
    parser.add_argument(
        "--uncached",
        action="store_true",
        help="also time normalisation with the ground truth re-read for every trial "
        "(load_ground_truth instead of load_ground_truth_cached: the code before issue 20)",
    )
    parser.add_argument(
        "--profile", type=int, default=0, help="print the N costliest functions (cProfile)"
    )
    parser.add_argument(
        "--reference-src",
        help="source tree of a reference (e.g. the code before a change): its warm per-trial "
        "CPU is measured in the same run, interleaved with this code's",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=0,
        help="warm passes in fresh processes (per tree), interleaved; the least is kept",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", help="keep generated data here instead of a temp folder")
    parser.add_argument("--quick", action="store_true", help="skip the half-size memory run")
    parser.add_argument(
        "--out-dir",
        help="where the passes write their documents (default: /dev/shm when writable, "
        "else the work folder; see _Outputs)",
    )
    args = parser.parse_args(argv)

    from retrieval_lib.normalize import normalize_paths
    from retrieval_lib.synth import generate_runs

    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="rl-bench-"))
    results: dict[str, object] = {"tasks": args.tasks, "trace_mb_target": args.trace_mb}
    shm = Path("/dev/shm")
    out_parent = Path(args.out_dir) if args.out_dir else shm if os.access(shm, os.W_OK) else work
    outputs = _Outputs(out_parent)
    results["out_dir"] = str(out_parent)
    try:
        data = work / "data"
        t0 = time.perf_counter()
        generate_runs(
            data,
            n_tasks=args.tasks,
            seed=args.seed,
            transcript_target_bytes=int(args.trace_mb * 1e6) or None,
            scale="bench",
        )
        results["generate_seconds"] = time.perf_counter() - t0
        runs, tasks = data / "runs", data / "benchmarks"
        files = _trace_files(runs)
        trace_bytes = sum(p.stat().st_size for p in files)
        results["trace_files"] = len(files)
        results["trace_mb"] = trace_bytes / 1e6

        # Reference in the same run: read + decode every JSON value, stdlib and orjson.
        import orjson

        _decode_reference(files[:50], json.loads)  # warm the page cache
        results["reference_json_seconds"] = _decode_reference(files, json.loads)
        results["reference_orjson_seconds"] = _decode_reference(files, orjson.loads)

        # In process, one worker: the per-core figure.
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        report = normalize_paths([runs], tasks, out=outputs.fresh("first"), workers=1)
        results["inprocess_seconds"] = time.perf_counter() - t0
        results["inprocess_cpu_seconds"] = time.process_time() - cpu0
        results["trials"] = report.trials
        results["events"] = report.events
        results["failed"] = report.failed
        # again, warm (the ground truth of every task is cached now): the steady state
        warm_out = outputs.fresh("warm")
        times0, cpu0 = os.times(), time.process_time()
        normalize_paths([runs], tasks, out=warm_out, workers=1)
        results["inprocess_warm_cpu_seconds"] = time.process_time() - cpu0
        times1 = os.times()
        results["inprocess_warm_user_seconds"] = times1.user - times0.user
        results["inprocess_warm_system_seconds"] = times1.system - times0.system
        results["io_floor_seconds"] = _io_floor(files, warm_out, outputs.fresh("io_floor"))
        if args.uncached:
            import retrieval_lib.normalize as normalize_module
            from retrieval_lib.ground_truth import load_ground_truth

            def uncached(task_dirs, *, tasks_root=None, pass_id=None):
                return load_ground_truth(task_dirs, tasks_root=tasks_root)

            cached = normalize_module.load_ground_truth_cached
            normalize_module.load_ground_truth_cached = uncached  # type: ignore[assignment]
            try:
                cpu0 = time.process_time()
                uncached_report = normalize_paths(
                    [runs], tasks, out=outputs.fresh("uncached"), workers=1
                )
                results["inprocess_uncached_cpu_seconds"] = time.process_time() - cpu0
                if uncached_report.failed:
                    raise SystemExit(f"uncached pass: {uncached_report.failures[0].error}")
            finally:
                normalize_module.load_ground_truth_cached = cached
        if args.profile:
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            profiler.enable()
            normalize_paths([runs], tasks, out=outputs.fresh("profile"), workers=1)
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(args.profile)

        if args.repeats or args.reference_src:
            here = Path(__file__).resolve().parents[1]
            trees = [("this", here)]
            if args.reference_src:
                trees.insert(0, ("reference", Path(args.reference_src).resolve()))
            passes: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
            for _ in range(max(1, args.repeats)):
                for label, src in trees:
                    passes[label].append(_warm_pass(src, runs, tasks, outputs.fresh(label)))
            for label, found in passes.items():
                results[f"warm_{label}_ms_per_trial"] = min(p["ms"] for p in found)
                results[f"warm_{label}_median_ms_per_trial"] = statistics.median(
                    p["ms"] for p in found
                )
                results[f"warm_{label}_floor_ms_per_trial"] = min(p["floor_ms"] for p in found)
                results[f"warm_{label}_passes"] = found

        # Whole command, start-up included, with its peak memory.
        seconds, rss, stdout = _child_rss_mb(
            _cli(
                "normalize",
                str(runs),
                "--tasks-root",
                str(tasks),
                "--out",
                str(outputs.fresh("command")),
                "--workers",
                "1",
                "--quiet",
            )
        )
        results["command_seconds"] = seconds
        results["command_peak_rss_mb"] = rss
        results["command_summary"] = stdout.strip()

        if not args.quick:
            # Memory must not grow with the number of trials: same command on half the tasks.
            half = work / "half"
            generate_runs(
                half,
                n_tasks=max(1, args.tasks // 2),
                seed=args.seed,
                transcript_target_bytes=int(args.trace_mb * 1e6) or None,
                scale="bench",
            )
            _, rss_half, _ = _child_rss_mb(
                _cli(
                    "normalize",
                    str(half / "runs"),
                    "--tasks-root",
                    str(half / "benchmarks"),
                    "--out",
                    str(outputs.fresh("command-half")),
                    "--workers",
                    "1",
                    "--quiet",
                )
            )
            results["command_peak_rss_mb_half_trials"] = rss_half

        startup, startup_rss, _ = _child_rss_mb(_cli("--version"))
        results["startup_seconds"] = startup
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys, retrieval_lib.cli as c; c.build_parser(); "
                "import retrieval_lib.normalize; "
                f"print(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules))",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        results["heavy_modules_on_normalize_path"] = probe.stdout.strip()
    finally:
        shutil.rmtree(outputs.root, ignore_errors=True)
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)

    mb = float(results["trace_mb"])  # type: ignore[arg-type]
    cpu = float(results["inprocess_cpu_seconds"])  # type: ignore[arg-type]
    rows = [
        (
            "trials / events",
            f"{results['trials']} / {results['events']} ({results['failed']} failed)",
        ),
        ("trace input", f"{mb:.1f} MB in {results['trace_files']} files"),
        (
            "in process, 1 worker",
            f"{mb / float(results['inprocess_seconds']):.1f} MB/s wall, {mb / cpu:.1f} MB/s per core (CPU), {int(results['trials']) / float(results['inprocess_seconds']):.0f} trials/s",
        ),  # type: ignore[arg-type]
        (
            "reference: read + json.loads (CPU)",
            f"{mb / float(results['reference_json_seconds']):.1f} MB/s",
        ),  # type: ignore[arg-type]
        (
            "floor: read + orjson.loads (CPU)",
            f"{mb / float(results['reference_orjson_seconds']):.1f} MB/s",
        ),  # type: ignore[arg-type]
        (
            "CPU ratio normalize / json.loads",
            f"{cpu / float(results['reference_json_seconds']):.2f}x",
        ),  # type: ignore[arg-type]
        (
            "whole command (start-up incl.)",
            f"{float(results['command_seconds']):.2f} s = {mb / float(results['command_seconds']):.1f} MB/s",
        ),  # type: ignore[arg-type]
        ("peak RSS, all trials", f"{float(results['command_peak_rss_mb']):.0f} MB"),  # type: ignore[arg-type]
    ]
    n_trials = int(results["trials"])  # type: ignore[arg-type]
    floor_ms = float(results["reference_orjson_seconds"]) / n_trials * 1e3  # type: ignore[arg-type]
    for label, key in (
        ("per trial, first pass (CPU)", "inprocess_cpu_seconds"),
        ("per trial, warm (CPU)", "inprocess_warm_cpu_seconds"),
        ("per trial, ground truth re-read (CPU)", "inprocess_uncached_cpu_seconds"),
    ):
        if key in results:
            ms = float(results[key]) / n_trials * 1e3  # type: ignore[arg-type]
            results[key.replace("seconds", "ms_per_trial")] = ms
            rows.append((label, f"{ms:.3f} ms = {ms / floor_ms:.2f}x read + orjson"))
    if "inprocess_warm_user_seconds" in results:
        user_ms = float(results["inprocess_warm_user_seconds"]) / n_trials * 1e3  # type: ignore[arg-type]
        system_ms = float(results["inprocess_warm_system_seconds"]) / n_trials * 1e3  # type: ignore[arg-type]
        rows.append(("warm: user / system per trial", f"{user_ms:.3f} / {system_ms:.3f} ms"))
    rows.append(("floor: read + orjson per trial (CPU)", f"{floor_ms:.3f} ms"))
    rows.append(("documents written to", f"{results['out_dir']} (--out-dir)"))
    if "io_floor_seconds" in results:
        io_ms = float(results["io_floor_seconds"]) / n_trials * 1e3  # type: ignore[arg-type]
        results["io_floor_ms_per_trial"] = io_ms
        rows.append(
            (
                "I/O floor: + result.json, dumps + atomic write",
                f"{io_ms:.3f} ms = {io_ms / floor_ms:.2f}x read + orjson",
            )
        )
    for label in ("reference", "this"):
        if f"warm_{label}_ms_per_trial" in results:
            ms = float(results[f"warm_{label}_ms_per_trial"])  # type: ignore[arg-type]
            fl = float(results[f"warm_{label}_floor_ms_per_trial"])  # type: ignore[arg-type]
            n_passes = len(results[f"warm_{label}_passes"])  # type: ignore[arg-type]
            median = float(results[f"warm_{label}_median_ms_per_trial"])  # type: ignore[arg-type]
            rows.append(
                (
                    f"warm, {label} code (least / median of {n_passes})",
                    f"{ms:.3f} / {median:.3f} ms per trial = {ms / fl:.2f}x / "
                    f"{median / fl:.2f}x the least floor ({fl:.3f} ms)",
                )
            )
    if "command_peak_rss_mb_half_trials" in results:
        rows.append(
            (
                "peak RSS, half the trials",
                f"{float(results['command_peak_rss_mb_half_trials']):.0f} MB",
            )
        )  # type: ignore[arg-type]
    rows.append(("CLI start-up (--version)", f"{float(results['startup_seconds']) * 1000:.0f} ms"))  # type: ignore[arg-type]
    rows.append(
        ("heavy modules imported by normalize", str(results["heavy_modules_on_normalize_path"]))
    )
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    out_dir = Path(__file__).resolve().parent / "out"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "normalize.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
