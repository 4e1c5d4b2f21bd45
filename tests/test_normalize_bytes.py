"""Normalisation's output bytes are frozen: the speed work of issue 20 changed none.

``fixtures/normalize_bytes/digests.json`` holds the SHA-256 of every event document that
``normalize_paths`` wrote for the bundled example and the CSB corpus with the code of main
at a28738a (before the per-trial overhead was cut), the generator's version replaced by
``X`` so that a version bump alone does not break the comparison. Any change to what a
document says (a key, a value, an order, the indentation) fails here; a deliberate change
of the format must regenerate the file and say why in its commit.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from retrieval_lib import __version__, bundled
from retrieval_lib.normalize import normalize_paths

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "csb"
DIGESTS = Path(__file__).parent / "fixtures" / "normalize_bytes" / "digests.json"
_GENERATOR = '"name": "retrieval_lib",\n    "version": "{}"'


def document_digests(root: Path, out: Path) -> dict[str, str]:
    """Normalise ``root/runs`` (ground truth from ``root/benchmarks``) into ``out``; return
    ``{document path relative to out: SHA-256 of its bytes}``, the version neutralised."""
    report = normalize_paths([root / "runs"], root / "benchmarks", out=out, workers=1)
    assert report.failed == 0
    ours = _GENERATOR.format(__version__).encode()
    neutral = _GENERATOR.format("X").encode()
    digests = {}
    for path in sorted(out.rglob("*.retrieval_events.json")):
        data = path.read_bytes()
        assert data.count(ours) == 1
        digests[path.relative_to(out).as_posix()] = hashlib.sha256(
            data.replace(ours, neutral)
        ).hexdigest()
    return digests


def _frozen(name: str) -> dict[str, str]:
    return json.loads(DIGESTS.read_text())[name]


def test_bundled_example_documents_are_byte_identical_to_before(tmp_path):
    frozen = _frozen("bundled")
    assert len(frozen) == 21
    assert document_digests(bundled.examples_dir(), tmp_path) == frozen


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"real corpus not found at {CORPUS}")
def test_csb_corpus_documents_are_byte_identical_to_before(tmp_path):
    frozen = _frozen("csb")
    assert len(frozen) == 6
    assert document_digests(CORPUS, tmp_path) == frozen


if __name__ == "__main__":  # regenerate (only for a deliberate change of the format)
    import tempfile

    found = {}
    for name, root in (("bundled", bundled.examples_dir()), ("csb", CORPUS)):
        with tempfile.TemporaryDirectory() as tmp:
            found[name] = document_digests(root, Path(tmp))
    DIGESTS.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
