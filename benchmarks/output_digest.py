"""Digest every output of the main jobs, to check that a refactor changes no byte.

Runs, with ``SOURCE_DATE_EPOCH`` fixed, the bundled demo (``retrieval-lib demo``), the real
corpus (``retrieval-lib run`` on ``../shared/corpus/csb``, every report included) and the Dask
path (``normalize`` and ``evaluate`` of the demo's example runs on a local Dask cluster of two
workers), then writes one line per output file: its path under the scratch folder and its
SHA-256. Two digests of the same code are identical; a refactor that claims "same outputs"
is checked by diffing the digest made before it with the one made after::

    python benchmarks/output_digest.py --out /tmp/before.tsv     # on the old commit
    python benchmarks/output_digest.py --out /tmp/after.tsv      # on the new commit
    diff /tmp/before.tsv /tmp/after.tsv

Outputs name their own paths (parameters, completion records), so every digest is made in the
same scratch folder (``--work``, emptied first). This is a recorded check, not a unit test: it takes a few minutes (three notebook renders per
job) and needs the ``notebooks`` and ``dask`` extras.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus" / "csb"
# Files whose bytes legitimately differ between two runs of the same code: none are expected;
# a name is added here only with the reason beside it.
VOLATILE: frozenset[str] = frozenset()


def _cli(*arguments: str, cwd: Path) -> None:
    command = [sys.executable, "-m", "retrieval_lib", *arguments]
    print("$", " ".join(command[2:]), flush=True)
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def produce(scratch: Path, *, corpus: Path | None) -> None:
    """Run the three jobs (two with ``corpus=None``), writing everything under ``scratch``."""
    _cli("demo", "--out", str(scratch / "demo"), cwd=scratch)
    if corpus is not None:
        _cli(
            "run",
            str(corpus / "runs"),
            "--tasks-root",
            str(corpus / "benchmarks"),
            "--out",
            str(scratch / "csb"),
            cwd=scratch,
        )
    example = scratch / "demo" / "example_data"
    runs = sorted(p for p in (example / "runs").iterdir() if p.is_dir())
    dask_out = scratch / "dask"
    _cli(
        "normalize",
        *map(str, runs),
        "--tasks-root",
        str(example / "benchmarks"),
        "--out",
        str(dask_out),
        "--dask-workers",
        "2",
        "--quiet",
        cwd=scratch,
    )
    _cli("evaluate", str(dask_out), "--dask-workers", "2", cwd=scratch)


def digest_lines(scratch: Path) -> list[str]:
    """One ``path<TAB>sha256`` line per file under ``scratch``, sorted by path."""
    lines = []
    for path in sorted(p for p in scratch.rglob("*") if p.is_file()):
        name = path.relative_to(scratch).as_posix()
        if name in VOLATILE:
            continue
        lines.append(f"{name}\t{_digest(path)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the digest file to write (TSV)")
    parser.add_argument("--corpus", default=str(CORPUS), help="the csb corpus folder")
    parser.add_argument(
        "--no-corpus",
        action="store_true",
        help="leave the corpus job out (two digests compare only when both left it out)",
    )
    parser.add_argument(
        "--work",
        default=str(Path(tempfile.gettempdir()) / "retrieval_lib_output_digest"),
        help="scratch folder, emptied first and kept (outputs name their own paths, so two "
        "digests compare only when made in the same folder)",
    )
    args = parser.parse_args(argv)
    corpus = None if args.no_corpus else Path(args.corpus)
    if corpus is not None and not corpus.is_dir():
        # A digest silently without the corpus compared "equal" to nothing (a tree copied
        # to /tmp has no ../shared beside it): say so instead.
        parser.error(f"no corpus at {corpus}: pass --corpus DIR, or --no-corpus")
    os.environ["SOURCE_DATE_EPOCH"] = os.environ.get("SOURCE_DATE_EPOCH", "1767225600")
    scratch = Path(args.work)
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    produce(scratch, corpus=corpus)
    lines = digest_lines(scratch)
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} files digested -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
