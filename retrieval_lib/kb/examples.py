"""The shipped knowledge-base example: corpus, golden set, two BM25 runs.

The corpus (30 short plain-text pages about the services of a made-up town) and the
golden set ship in ``retrieval_lib/kb/example_data/``. :func:`build_example` chunks the
corpus twice,

- ``window200-v1``: fixed 200-character windows (no overlap, cut anywhere), ids
  ``<doc>:w<NN>``; the golden set's ``expected_chunk_ids`` refer to these;
- ``paragraph-v2``: one chunk per paragraph (blank-line separated), ids ``<doc>:p<NN>``,

retrieves the top 10 chunks of each golden query with a real BM25 retriever
(:class:`rank_bm25.BM25Okapi`, default parameters; chunks with score <= 0 are not
returned; equal scores are ordered by :func:`retrieval_lib.metrics.ranking.rank_by_score`:
score descending, then chunk id descending), and writes an extractive answer: the top
chunk's text citing it as ``[#1]``, or a refusal (``grounded: false``) when the top score
is below :data:`REFUSAL_THRESHOLD`.

Only regenerating the runs needs the retriever (the ``[kb]`` extra). Its output is
committed twice, byte for byte: under ``examples/kb/`` (the files the READMEs' commands
use) and in the package, ``retrieval_lib/kb/example_data/``, from which
:func:`write_example` and :func:`build_example_store` (the ``kb_compare`` notebook's
example database) work in any installation, without ``rank_bm25``. Everything is
deterministic; regenerate both copies with::

    python -c "from retrieval_lib.kb.examples import build_example; build_example('examples/kb'); build_example('retrieval_lib/kb/example_data')"

Comparing the two runs exercises the chunker-version fallback (doc + span overlap) for real.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from retrieval_lib.io import atomic_write_bytes, atomic_write_text, dumps_json

__all__ = [
    "EXAMPLE_RUNS",
    "REFUSAL_THRESHOLD",
    "TOP_K",
    "WINDOW_SIZE",
    "ExampleChunk",
    "ExampleRun",
    "build_example",
    "build_example_store",
    "chunk_fixed_windows",
    "chunk_paragraphs",
    "example_files",
    "load_corpus",
    "tokenize",
    "write_example",
]

WINDOW_SIZE = 200
TOP_K = 10
#: Top BM25 scores below this refuse. On this corpus every answerable query scores above
#: 6; the off-topic "football world cup" query matches the youth-sports page at 3.87 with
#: 200-character windows (refused) but 4.09 with paragraphs (answered): a refusal
#: regression the comparison of the two runs shows.
REFUSAL_THRESHOLD = 4.0
REFUSAL_TEXT = "I cannot answer this from the Harbor Town knowledge base."

_TOKEN = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")
_STOPWORDS = frozenset(
    ("a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from")
    + ("how", "i", "in", "is", "it", "my", "of", "on", "or", "the", "to", "what", "when")
    + ("where", "which", "who", "with")
)


@dataclass(frozen=True)
class ExampleChunk:
    """A chunk of the example corpus with its text."""

    chunk_id: str
    doc_id: str
    start: int
    end: int
    text: str

    def inventory_line(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "source_spans": [[self.start, self.end]],
        }


@dataclass(frozen=True)
class ExampleRun:
    """One example run: its id, chunker version and file names inside the example folder."""

    run_id: str
    chunker_version: str
    chunks_file: str
    results_file: str
    config_file: str


EXAMPLE_RUNS: tuple[ExampleRun, ...] = (
    ExampleRun(
        "bm25-window200-v1", "window200-v1", "chunks_v1.jsonl", "results_v1.jsonl", "config_v1.json"
    ),
    ExampleRun(
        "bm25-paragraph-v2", "paragraph-v2", "chunks_v2.jsonl", "results_v2.jsonl", "config_v2.json"
    ),
)


def _data_dir() -> Path:
    return Path(str(resources.files("retrieval_lib.kb") / "example_data"))


def example_files() -> list[str]:
    """Relative paths of the example's files (corpus, golden set, the runs' files), sorted.

    Examples
    --------
    >>> [f for f in example_files() if not f.startswith("corpus/")]  # doctest: +NORMALIZE_WHITESPACE
    ['chunks_v1.jsonl', 'chunks_v2.jsonl', 'config_v1.json', 'config_v2.json', 'golden.yaml',
     'results_v1.jsonl', 'results_v2.jsonl']
    """
    corpus = [f"corpus/{p.name}" for p in (_data_dir() / "corpus").glob("*.txt")]
    runs = [
        name
        for run in EXAMPLE_RUNS
        for name in (run.chunks_file, run.results_file, run.config_file)
    ]
    return sorted([*corpus, "golden.yaml", *runs])


def load_corpus() -> dict[str, str]:
    """The example corpus: ``{doc_id: text}`` sorted by doc id."""
    folder = _data_dir() / "corpus"
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.txt"))}


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens without a few stop words.

    Examples
    --------
    >>> tokenize("What is the fee per kilolitre? 2.10 dollars")
    ['fee', 'per', 'kilolitre', '2.10', 'dollars']
    """
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


def chunk_fixed_windows(doc_id: str, text: str, size: int = WINDOW_SIZE) -> list[ExampleChunk]:
    """Consecutive ``size``-character windows (the last one shorter), trailing blanks kept out.

    Examples
    --------
    >>> [(c.chunk_id, c.start, c.end) for c in chunk_fixed_windows("d", "x" * 450)]
    [('d:w00', 0, 200), ('d:w01', 200, 400), ('d:w02', 400, 450)]
    """
    body_end = len(text.rstrip())
    chunks = []
    for index, start in enumerate(range(0, body_end, size)):
        end = min(start + size, body_end)
        chunks.append(ExampleChunk(f"{doc_id}:w{index:02d}", doc_id, start, end, text[start:end]))
    return chunks


def chunk_paragraphs(doc_id: str, text: str) -> list[ExampleChunk]:
    """One chunk per blank-line separated paragraph; spans exclude the separators.

    Examples
    --------
    >>> [(c.chunk_id, c.start, c.end) for c in chunk_paragraphs("d", "ab\\n\\ncd\\n")]
    [('d:p00', 0, 2), ('d:p01', 4, 6)]
    """
    paragraphs = re.finditer(r"\S(?:.*?\S)?(?=\n\s*\n|\s*\Z)", text, re.S)
    return [
        ExampleChunk(f"{doc_id}:p{index:02d}", doc_id, match.start(), match.end(), match.group())
        for index, match in enumerate(paragraphs)
    ]


def _retrieve(
    chunks: Sequence[ExampleChunk], queries: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    try:
        from rank_bm25 import BM25Okapi
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            "regenerating the example runs needs rank_bm25 (pip install -e '.[kb]'); "
            "write_example() and build_example_store() use the shipped runs without it",
            name=exc.name,
        ) from None

    from retrieval_lib.metrics.ranking import rank_by_score

    index = BM25Okapi([tokenize(c.text) for c in chunks])
    by_id = {c.chunk_id: c for c in chunks}
    lines = []
    for query in queries:
        scores = index.get_scores(tokenize(query["query"]))
        scored = [(c.chunk_id, float(s)) for c, s in zip(chunks, scores, strict=True) if s > 0]
        ranked = [str(chunk_id) for chunk_id in rank_by_score(scored)[:TOP_K]]
        score_of = dict(scored)
        hits: list[dict[str, Any]] = [
            {
                "chunk_id": chunk_id,
                "doc_id": by_id[chunk_id].doc_id,
                "rank": rank,
                "score": round(score_of[chunk_id], 6),
                "source_spans": [[by_id[chunk_id].start, by_id[chunk_id].end]],
            }
            for rank, chunk_id in enumerate(ranked, start=1)
        ]
        if hits and hits[0]["score"] >= REFUSAL_THRESHOLD:
            top = hits[0]["chunk_id"]
            answer: dict[str, Any] = {
                "text": f"{by_id[top].text} [#1]",
                "grounded": True,
                "citations": [{"citation": "[#1]", "chunk_id": top}],
            }
        else:
            answer = {"text": REFUSAL_TEXT, "grounded": False, "citations": []}
        lines.append({"query_id": query["id"], "hits": hits, "answer": answer, "error": None})
    return lines


def _jsonl(rows: Sequence[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) + b"\n" for r in rows)


def _example_paths(out: Path) -> dict[str, Path]:
    """The example's files under ``out`` by role (``golden``, ``corpus``, ``chunks_v1``, ...)."""
    paths = {"golden": out / "golden.yaml", "corpus": out / "corpus"}
    for run, tag in zip(EXAMPLE_RUNS, ("v1", "v2"), strict=True):
        paths[f"chunks_{tag}"] = out / run.chunks_file
        paths[f"results_{tag}"] = out / run.results_file
        paths[f"config_{tag}"] = out / run.config_file
    return paths


def build_example(out_dir: str | Path) -> dict[str, Path]:
    """Write the example (corpus, golden set, chunk inventories, results, configs) to ``out_dir``.

    Returns
    -------
    dict
        Paths of the written files by role (``golden``, ``chunks_v1``, ``results_v1``, ...).

    Examples
    --------
    >>> import tempfile
    >>> paths = build_example(tempfile.mkdtemp())
    >>> sorted(paths)[:3]
    ['chunks_v1', 'chunks_v2', 'config_v1']
    """
    import yaml

    out = Path(out_dir)
    data = _data_dir()
    corpus = load_corpus()
    for doc_id, text in corpus.items():
        atomic_write_text(out / "corpus" / f"{doc_id}.txt", text)
    golden_text = (data / "golden.yaml").read_text(encoding="utf-8")
    atomic_write_text(out / "golden.yaml", golden_text)
    queries = yaml.safe_load(golden_text)

    chunkers = {
        "window200-v1": lambda d, t: chunk_fixed_windows(d, t, WINDOW_SIZE),
        "paragraph-v2": chunk_paragraphs,
    }
    paths = _example_paths(out)
    for run, tag in zip(EXAMPLE_RUNS, ("v1", "v2"), strict=True):
        chunks = [
            c
            for doc_id, text in corpus.items()
            for c in chunkers[run.chunker_version](doc_id, text)
        ]
        results = _retrieve(chunks, queries)
        config = {
            "retriever": "rank_bm25.BM25Okapi",
            "bm25": {"k1": 1.5, "b": 0.75, "epsilon": 0.25},
            "chunker": run.chunker_version,
            "top_k": TOP_K,
            "refusal_threshold": REFUSAL_THRESHOLD,
            "answer": "extractive: top chunk text citing [#1]",
        }
        atomic_write_bytes(paths[f"chunks_{tag}"], _jsonl([c.inventory_line() for c in chunks]))
        atomic_write_bytes(paths[f"results_{tag}"], _jsonl(results))
        atomic_write_text(paths[f"config_{tag}"], dumps_json(config))
    return paths


def write_example(out_dir: str | Path) -> dict[str, Path]:
    """Copy the shipped example (corpus, golden set, both runs' files) to ``out_dir``.

    No retriever is needed: the runs are the committed output of :func:`build_example`.

    Returns
    -------
    dict
        Paths of the written files by role, as :func:`build_example` returns them.

    Examples
    --------
    >>> import tempfile
    >>> paths = write_example(tempfile.mkdtemp())
    >>> paths["results_v2"].name, len(list(paths["corpus"].glob("*.txt")))
    ('results_v2.jsonl', 30)
    """
    out = Path(out_dir)
    data = _data_dir()
    for name in example_files():
        atomic_write_bytes(out / name, (data / name).read_bytes())
    return _example_paths(out)


def build_example_store(
    db_path: str | Path, example_dir: str | Path | None = None
) -> tuple[Path, str, str]:
    """Ingest both example runs into the store at ``db_path`` (must not hold them yet).

    The shipped example files are written to ``example_dir`` (default:
    ``<db folder>/kb-example``) by :func:`write_example` first; no retriever is needed.
    Aggregates are computed and stored. Returns ``(db_path, run_a, run_b)``.

    Examples
    --------
    >>> import tempfile, os
    >>> db, a, b = build_example_store(os.path.join(tempfile.mkdtemp(), "eval.sqlite"))
    >>> a, b
    ('bm25-window200-v1', 'bm25-paragraph-v2')
    """
    from retrieval_lib.kb.ingest import ingest_run
    from retrieval_lib.kb.metrics import compute_aggregate, store_aggregate
    from retrieval_lib.kb.store import KBStore

    db = Path(db_path)
    folder = Path(example_dir) if example_dir is not None else db.parent / "kb-example"
    write_example(folder)
    with KBStore(db) as store:
        for run in EXAMPLE_RUNS:
            ingest_run(
                store,
                folder / run.results_file,
                folder / "golden.yaml",
                chunks_path=folder / run.chunks_file,
                run_id=run.run_id,
                chunker_version=run.chunker_version,
                config_path=folder / run.config_file,
                suite="harbor-town",
            )
            store_aggregate(store, run.run_id, compute_aggregate(store, run.run_id))
    return db, EXAMPLE_RUNS[0].run_id, EXAMPLE_RUNS[1].run_id
