"""Knowledge-base evaluation at scale: ingest and compare runs of 100,000 queries x 10 hits.

Generates (seeded) a golden set in JSON syntax, two chunk inventories (100-character
windows ``v1``, 150-character windows ``v2``) and three runs:

* ``A`` and ``B``: chunker ``v1``, different retrieval quality -> ``compare A B`` is exact;
* ``C``: chunker ``v2`` -> ``compare A C`` uses the doc + span-overlap fallback.

Each results line has 10 hits with spans, an answer with one citation, a few failed
queries and 2% should-refuse queries. Then it times, in process:

* ``ingest_run`` of A (with its chunk inventory), B and C (one transaction each);
* ``compute_aggregate`` + ``store_aggregate`` of A;
* ``compare_runs(A, B)`` (exact) and ``compare_runs(A, C)`` (fallback), 2,000 bootstrap
  resamples each, and ``render_report_md``;
* ``retrieval-lib kb compare A B --json`` as a subprocess (start-up included);

and reports peak RSS and the database size. ``compute_aggregate`` and the two compares
are each run in a fresh subprocess (so each has its own peak RSS), once with the library
(the stored columns) and, unless ``--no-reference``, once with the reference: the same
runs as records held in memory (``load_results`` + ``aggregate_from_records`` /
``compare_records``, the Python API, which puts the records into columns with the same
builder as ingest). Both must give the same JSON to the byte (checked by SHA-256); the
ratio, measured in the same run, is what reading the stored columns saves over decoding
every JSON document. Results are printed and written to ``benchmarks/out/kb.json``.

Usage::

    .venv/bin/python benchmarks/kb.py                  # 100,000 queries x 10 hits
    .venv/bin/python benchmarks/kb.py --queries 20000  # quicker
    .venv/bin/python benchmarks/kb.py --no-reference   # library path only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

from retrieval_lib.kb.compare import compare_records, compare_runs
from retrieval_lib.kb.golden import GoldenSet
from retrieval_lib.kb.ingest import ingest_run
from retrieval_lib.kb.metrics import aggregate_from_records, compute_aggregate, store_aggregate
from retrieval_lib.kb.report_md import render_report_md
from retrieval_lib.kb.store import KBStore

DOC_LENGTH = 600
HITS = 10


def _windows(size: int) -> list[tuple[int, int]]:
    return [(s, min(s + size, DOC_LENGTH)) for s in range(0, DOC_LENGTH, size)]


V1 = _windows(100)
V2 = _windows(150)


def generate(folder: Path, n_queries: int, seed: int) -> dict[str, Path]:
    """Write golden.json, chunks_v1/v2.jsonl and results_a/b/c.jsonl into ``folder``."""
    rng = np.random.default_rng(seed)
    n_docs = max(n_queries // 5, 10)
    paths = {
        "golden": folder / "golden.yaml",
        "chunks_v1": folder / "chunks_v1.jsonl",
        "chunks_v2": folder / "chunks_v2.jsonl",
    }
    for tag, windows in (("v1", V1), ("v2", V2)):
        with paths[f"chunks_{tag}"].open("wb") as handle:
            for d in range(n_docs):
                for j, (s, e) in enumerate(windows):
                    handle.write(
                        orjson.dumps(
                            {
                                "chunk_id": f"d{d}:{tag}-{j}",
                                "doc_id": f"d{d}",
                                "source_spans": [[s, e]],
                            }
                        )
                        + b"\n"
                    )

    expected_doc = rng.integers(0, n_docs, n_queries)
    expected_window = rng.integers(0, len(V1), n_queries)
    refuse = rng.random(n_queries) < 0.02
    golden = []
    for i in range(n_queries):
        if refuse[i]:
            golden.append({"id": f"q{i:06d}", "query": f"off-topic {i}", "expected_doc_ids": []})
            continue
        golden.append(
            {
                "id": f"q{i:06d}",
                "query": f"question {i}",
                "expected_doc_ids": [f"d{expected_doc[i]}"],
                "expected_chunk_ids": [f"d{expected_doc[i]}:v1-{expected_window[i]}"],
                "must_contain": ["alpha"],
                "forbidden": ["omega"],
            }
        )
    paths["golden"].write_bytes(orjson.dumps(golden))

    def run(name: str, tag: str, p_found: float, run_seed: int) -> None:
        run_rng = np.random.default_rng(run_seed)
        windows = V1 if tag == "v1" else V2
        found = run_rng.random(n_queries) < p_found
        found_rank = run_rng.integers(1, HITS + 1, n_queries)
        other_docs = run_rng.integers(0, n_docs, (n_queries, HITS))
        other_windows = run_rng.integers(0, len(windows), (n_queries, HITS))
        failed = run_rng.random(n_queries) < 0.005
        says_alpha = run_rng.random(n_queries) < 0.8
        path = folder / f"results_{name}.jsonl"
        paths[f"results_{name}"] = path
        with path.open("wb") as handle:
            for i in range(n_queries):
                qid = f"q{i:06d}"
                if failed[i]:
                    handle.write(
                        orjson.dumps({"query_id": qid, "hits": [], "error": "timeout"}) + b"\n"
                    )
                    continue
                hits = []
                used = set()
                target = None
                if found[i] and not refuse[i]:
                    s, e = V1[expected_window[i]]
                    # the window of this chunker that best covers the expected v1 window
                    best = max(
                        range(len(windows)),
                        key=lambda j: min(e, windows[j][1]) - max(s, windows[j][0]),
                    )
                    target = (f"d{expected_doc[i]}", best)
                for rank in range(1, HITS + 1):
                    if target is not None and rank == found_rank[i]:
                        doc, j = target
                    else:
                        doc, j = f"d{other_docs[i, rank - 1]}", int(other_windows[i, rank - 1])
                        while (doc, j) in used or (doc, j) == target:
                            j = (j + 1) % len(windows)
                    used.add((doc, j))
                    s, e = windows[j]
                    hits.append(
                        {
                            "chunk_id": f"{doc}:{tag}-{j}",
                            "doc_id": doc,
                            "rank": rank,
                            "score": round(1.0 / rank, 6),
                            "source_spans": [[s, e]],
                        }
                    )
                refused = refuse[i] and run_rng.random() < 0.7
                answer = (
                    {"text": "I cannot answer.", "grounded": False, "citations": []}
                    if refused
                    else {
                        "text": ("alpha " if says_alpha[i] else "") + "answer [#1]",
                        "grounded": True,
                        "citations": [{"citation": "[#1]", "chunk_id": hits[0]["chunk_id"]}],
                    }
                )
                handle.write(
                    orjson.dumps({"query_id": qid, "hits": hits, "answer": answer, "error": None})
                    + b"\n"
                )

    run("a", "v1", 0.70, seed + 1)
    run("b", "v1", 0.75, seed + 2)
    run("c", "v2", 0.75, seed + 3)
    return paths


def _timed(label: str, timings: dict[str, float], func, *args, **kwargs):
    start = time.perf_counter()
    value = func(*args, **kwargs)
    timings[label] = time.perf_counter() - start
    print(f"  {label:<42} {timings[label]:8.2f} s", flush=True)
    return value


def reference_aggregate(store: KBStore, run_id: str):
    """compute_aggregate from records held in memory (decoded from the JSON documents)."""
    run = store.get_run(run_id)
    inventory = store.load_chunks(run_id)
    return aggregate_from_records(
        GoldenSet.from_snapshot(run.golden_snapshot),
        store.load_results(run_id),
        set(inventory) if inventory else None,
    )


def reference_compare(store: KBStore, run_id_a: str, run_id_b: str):
    """compare_runs from records held in memory (decoded from the JSON documents)."""
    run_a, run_b = store.get_run(run_id_a), store.get_run(run_id_b)
    chunks_a, chunks_b = store.load_chunks(run_id_a), store.load_chunks(run_id_b)
    return compare_records(
        run_id_a,
        run_id_b,
        GoldenSet.from_snapshot(run_a.golden_snapshot),
        GoldenSet.from_snapshot(run_b.golden_snapshot),
        store.load_results(run_id_a),
        store.load_results(run_id_b),
        chunks_a=set(chunks_a) if chunks_a else None,
        chunks_b=set(chunks_b) if chunks_b else None,
        chunker_version_a=run_a.chunker_version,
        chunker_version_b=run_b.chunker_version,
    )


STEPS = {
    "aggregate A": ("A", None),
    "compare A B (exact)": ("A", "B"),
    "compare A C (fallback_doc_span)": ("A", "C"),
}


def run_step(db: str, step: str, engine: str) -> dict[str, float | str]:
    """Time one step in this (fresh) process; its peak RSS and the output's SHA-256."""
    run_a, run_b = STEPS[step]
    with KBStore(db, create=False) as store:
        start = time.perf_counter()
        if run_b is None:
            func = compute_aggregate if engine == "library" else reference_aggregate
            text = func(store, run_a).to_json()
        else:
            func = compare_runs if engine == "library" else reference_compare
            text = func(store, run_a, run_b).to_json()
        seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "peak_rss_mb": _own_peak_rss_mb(),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


def _own_peak_rss_mb() -> float:
    """Peak RSS of this process image. ``ru_maxrss`` survives ``exec`` on Linux, so a
    child started by a large parent would report the parent's size; ``VmHWM`` is the
    high-water mark of the current address space only."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _step_in_subprocess(db: Path, step: str, engine: str) -> dict[str, float | str]:
    completed = subprocess.run(
        [sys.executable, __file__, "--step", step, "--engine", engine, "--db", str(db)],
        capture_output=True,
        check=True,
    )
    return json.loads(completed.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--queries", type=int, default=100_000, help="queries per run (default 100000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument(
        "--out",
        default=str(Path(__file__).resolve().parent / "out" / "kb.json"),
        help="JSON result file",
    )
    parser.add_argument(
        "--no-reference", action="store_true", help="skip the reference (in-memory records)"
    )
    parser.add_argument("--step", choices=sorted(STEPS), help=argparse.SUPPRESS)
    parser.add_argument("--engine", choices=("library", "reference"), help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.step:  # internal: one measured step in a fresh process
        print(json.dumps(run_step(args.db, args.step, args.engine)))
        return 0

    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        folder = Path(tmp)
        timings: dict[str, float] = {}
        print(f"kb benchmark: {args.queries:,} queries x {HITS} hits per run, 3 runs", flush=True)
        paths = _timed(
            "generate inputs (not part of the library)",
            timings,
            generate,
            folder,
            args.queries,
            args.seed,
        )
        sizes = {name: path.stat().st_size for name, path in paths.items()}
        db = folder / "eval.sqlite"
        with KBStore(db) as store:
            _timed(
                "ingest A (with 6-chunk/doc inventory)",
                timings,
                ingest_run,
                store,
                paths["results_a"],
                paths["golden"],
                chunks_path=paths["chunks_v1"],
                run_id="A",
                chunker_version="v1",
            )
            _timed(
                "ingest B",
                timings,
                ingest_run,
                store,
                paths["results_b"],
                paths["golden"],
                chunks_path=paths["chunks_v1"],
                run_id="B",
                chunker_version="v1",
            )
            _timed(
                "ingest C (chunker v2)",
                timings,
                ingest_run,
                store,
                paths["results_c"],
                paths["golden"],
                chunks_path=paths["chunks_v2"],
                run_id="C",
                chunker_version="v2",
            )
            aggregate = _timed("compute_aggregate A", timings, compute_aggregate, store, "A")
            _timed("store_aggregate A", timings, store_aggregate, store, "A", aggregate)
            exact = _timed("compare_runs A B (exact)", timings, compare_runs, store, "A", "B")
            fallback = _timed(
                "compare_runs A C (fallback_doc_span)", timings, compare_runs, store, "A", "C"
            )
            _timed("render_report_md (A vs C)", timings, render_report_md, fallback)
            integrity = store.integrity_check()
        start = time.perf_counter()
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "retrieval_lib",
                "kb",
                "compare",
                "A",
                "B",
                "--db",
                str(db),
                "--json",
            ],
            capture_output=True,
            check=True,
        )
        timings["cli: retrieval-lib kb compare A B --json"] = time.perf_counter() - start
        print(
            f"  {'cli: retrieval-lib kb compare A B --json':<42} {timings['cli: retrieval-lib kb compare A B --json']:8.2f} s"
        )
        cli_report = json.loads(completed.stdout)
        assert cli_report["deltas"]["mrr"] == json.loads(exact.to_json())["deltas"]["mrr"]
        db_bytes = db.stat().st_size + sum(p.stat().st_size for p in folder.glob("eval.sqlite-*"))
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        print("each step in a fresh process (seconds, peak RSS of that process):", flush=True)
        engines = ("library",) if args.no_reference else ("library", "reference")
        isolated: dict[str, dict[str, dict[str, float | str]]] = {}
        for step in STEPS:
            isolated[step] = {}
            for engine in engines:
                measured = _step_in_subprocess(db, step, engine)
                isolated[step][engine] = measured
                print(
                    f"  {step:<32} {engine:<9} {measured['seconds']:8.2f} s "
                    f"{measured['peak_rss_mb']:8.0f} MB",
                    flush=True,
                )
            if not args.no_reference:
                library, reference = isolated[step]["library"], isolated[step]["reference"]
                if library["sha256"] != reference["sha256"]:
                    raise SystemExit(f"{step}: the library and the reference outputs differ")
                print(
                    f"  {step:<32} identical output; {float(reference['seconds']) / float(library['seconds']):.1f}x "
                    "faster than the reference",
                    flush=True,
                )
    summary = {
        "queries_per_run": args.queries,
        "hits_per_query": HITS,
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
        "per_query_us": {
            "ingest A": round(
                timings["ingest A (with 6-chunk/doc inventory)"] / args.queries * 1e6, 1
            ),
            "compare exact": round(timings["compare_runs A B (exact)"] / args.queries * 1e6, 1),
            "compare fallback": round(
                timings["compare_runs A C (fallback_doc_span)"] / args.queries * 1e6, 1
            ),
        },
        "input_mb": {k: round(v / 1e6, 1) for k, v in sizes.items()},
        "database_mb": round(db_bytes / 1e6, 1),
        "peak_rss_mb": round(peak_mb, 1),
        "integrity_check": integrity,
        "isolated_steps": {
            step: {
                engine: {
                    "seconds": round(float(m["seconds"]), 3),
                    "peak_rss_mb": round(float(m["peak_rss_mb"]), 1),
                    "sha256": m["sha256"],
                }
                for engine, m in measured.items()
            }
            for step, measured in isolated.items()
        },
        "results": {
            "mrr_a": aggregate.mrr,
            "exact": {
                "mrr_delta": exact.deltas["mrr"],
                "kinds": exact.kind_counts(),
                "match": exact.chunker_version_match,
            },
            "fallback": {
                "mrr_delta": fallback.deltas["mrr"],
                "kinds": fallback.kind_counts(),
                "match": fallback.chunker_version_match,
            },
        },
    }
    print(
        json.dumps(
            {
                k: summary[k]
                for k in (
                    "per_query_us",
                    "input_mb",
                    "database_mb",
                    "peak_rss_mb",
                    "results",
                )
            },
            indent=2,
        )
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
