"""Issue 21, item 9: one convention on `Study`, `pairs()` with the per-task deltas, and
`load` under the same dependency rule as `retrieval-lib study`."""

from __future__ import annotations

import functools
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval_lib.errors import InputError
from retrieval_lib.study import Study, StudyOptions, load

from . import synthetic

REPO = Path(__file__).resolve().parents[2]

#: The loaded tables: attributes. Everything else public and computed: a method.
DATA = {"trials", "events", "exclusions", "metrics", "analysed", "config_map", "sources", "options"}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("api-study")
    runs, tasks = synthetic.build(root)
    return load([runs], tasks_root=tasks, out=root / "out", options=StudyOptions(n_boot=200))


def test_attributes_are_data_and_every_analysis_is_a_method():
    fields = set(Study.__dataclass_fields__)
    members = {
        name: inspect.getattr_static(Study, name, None)
        for name in {*dir(Study), *fields}
        if not name.startswith("_")
    }
    attributes = {
        name
        for name, member in members.items()
        if name in fields or isinstance(member, (property, functools.cached_property))
    }
    assert attributes == DATA
    methods = {name for name, member in members.items() if inspect.isfunction(member)}
    for analysis in ("pairs", "leaderboard", "matched", "tiers", "tool_value", "impact"):
        assert analysis in methods
    # the old property spelling of the per-tool table is gone (tool_value("tool"))
    assert "tools" not in members
    doc = inspect.getdoc(Study) or ""
    assert "Attributes (no parentheses) are the study's data" in doc
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "study.pairs()" in readme and "study.tools " not in readme


def test_pairs_carries_each_tasks_delta_worked_out_from_its_own_trials(study):
    pairs = study.pairs()
    assert list(pairs.columns[-2:]) == ["delta:reward", "delta:passed"]
    # by hand from synthetic.py: alpha-001/m1 baseline (0.0 + 0.5)/2 = 0.25, mcp 1.0;
    # alpha-001/m2 0.0 vs (1.0 + 0.0)/2 = 0.5; beta-002/m1 1.0 vs 1.0; gamma-003/m1 0 vs 1
    expected = {
        ("alpha-001", "m1"): 0.75,
        ("alpha-001", "m2"): 0.5,
        ("beta-002", "m1"): 0.0,
        ("gamma-003", "m1"): 1.0,
    }
    for (task, model), rows in pairs.groupby(["task_name", "model"]):
        assert rows["delta:reward"].tolist() == pytest.approx([expected[task, model]] * len(rows))
        # the same, recomputed from the trials listed: mean treatment - mean baseline
        used = rows[rows["combined"]]
        means = used.groupby("side")["reward"].mean()
        assert rows["delta:reward"].iloc[0] == pytest.approx(means["treatment"] - means["baseline"])
    # other deltas on request, a single name too; a typo gets a suggestion
    cost = study.pairs("total_tokens")
    assert list(cost.columns[-1:]) == ["delta:total_tokens"]
    assert list(study.pairs(()).columns) == list(pairs.columns[:-2])
    with pytest.raises(InputError, match="did you mean 'reward'"):
        study.pairs(["rewad"])


_NO_STATS = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("scipy", "pingouin"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
from retrieval_lib.lazylibs import MissingExtraError
from retrieval_lib.study import load
try:
    load([sys.argv[1]], tasks_root=sys.argv[2], out=sys.argv[3])
except MissingExtraError as exc:
    print("refused:", exc)
    sys.exit(3)
print("loaded without scipy")
"""


def test_load_needs_the_stats_extra_like_the_study_command(tmp_path):
    examples = REPO / "examples"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _NO_STATS,
            str(examples / "runs"),
            str(examples / "benchmarks"),
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "retrieval_lib.study.load needs the 'stats' extra" in done.stdout
    assert "pip install 'retrieval_lib[stats]'" in done.stdout
    assert not (tmp_path / "out").exists()  # refused before normalising anything
    # the command refuses the same way, naming the same extra
    cli = _NO_STATS.split("from retrieval_lib.lazylibs")[0] + (
        "from retrieval_lib.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    )
    command = subprocess.run(
        [
            sys.executable,
            "-c",
            cli,
            "study",
            str(examples / "runs"),
            "--tasks-root",
            str(examples / "benchmarks"),
            "--out",
            str(tmp_path / "cli"),
            "--no-report",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert command.returncode == 1
    assert "pip install 'retrieval_lib[stats]'" in command.stderr
