"""Every section table equals its frozen value from before the archive-scale rewrite.

``frozen_sections.freeze`` wrote ``tests/study/frozen/*.json`` with the code of main at
``a28738a`` (before issue 20's vectorised study computations): the bundled example (with
and without flagged trials), the csb corpus, the hand-made study of ``synthetic.py`` and a
240-task study replicated from the bundled trials (3 models, 4 families, repeated trials,
missing rewards). Numbers may differ only by floating-point summation order.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from .frozen_sections import FROZEN, sections_values, studies


@pytest.fixture(scope="module")
def current(tmp_path_factory):
    return studies(Path(tmp_path_factory.mktemp("frozen")))


def _same(a, b) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(b, float) and isinstance(a, int) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


@pytest.mark.parametrize("case", ["bundled", "bundled_unflagged", "replicated", "csb", "synthetic"])
def test_sections_equal_their_frozen_values(current, case):
    if case not in current:
        pytest.skip("../shared/corpus/csb is not here")
    frozen = json.loads((FROZEN / f"{case}.json").read_text(encoding="utf-8"))
    now = json.loads(json.dumps(sections_values(current[case])))
    assert sorted(now) == sorted(frozen)
    assert now["_params"] == frozen["_params"]
    for name in sorted(k for k in frozen if k != "_params"):
        assert now[name]["columns"] == frozen[name]["columns"], name
        assert len(now[name]["rows"]) == len(frozen[name]["rows"]), name
        for i, (got, want) in enumerate(zip(now[name]["rows"], frozen[name]["rows"], strict=True)):
            assert _same(got, want), f"{case}: {name} row {i}: {got} != {want}"
