"""Every config family compared (issue 19): pairs, Friedman, the ranx-style table and its
Markdown / LaTeX export, per-model effects and the difference of differences.

Expected values are worked out by hand from the small tables below (and checked against
scipy / pingouin in tests/stats/test_multi.py).
"""

from __future__ import annotations

import math
import re
import shutil

import numpy as np
import pandas as pd
import pytest

from retrieval_lib.cli import main
from retrieval_lib.study.compare import (
    compare_families,
    comparison_pairs,
    family_comparisons,
    latex_text,
    model_effects,
    model_interactions,
    reference_family,
)

# 8 tasks, one model: baseline always 0, hybrid 1 on 7 tasks and 0.5 on t7, mcp 1 on t6 only.
REWARDS = {
    "baseline": [0, 0, 0, 0, 0, 0, 0, 0],
    "hybrid": [1, 1, 1, 1, 1, 1, 1, 0.5],
    "mcp": [0, 0, 0, 0, 0, 0, 1, 0],
}


def _trials(rewards=REWARDS, model="m1", names=None) -> pd.DataFrame:
    names = names or {f: f for f in rewards}
    rows = []
    for family, values in rewards.items():
        for i, value in enumerate(values):
            rows.append(
                {
                    "trial_id": f"{model}-{family}-{i}",
                    "run_id": "r",
                    "model": model,
                    "config_name": names[family],
                    "config_family": names[family],
                    "task_name": f"t{i}",
                    "reward": float(value),
                    "passed": value >= 1,
                }
            )
    return pd.DataFrame(rows)


def test_reference_and_pairs():
    assert reference_family(["mcp", "hybrid", "baseline"]) == "baseline"
    assert reference_family(["mcp", "hybrid"]) == "hybrid"  # no baseline*: the first
    assert reference_family(["mcp", "hybrid", "baseline"], "mcp") == "mcp"
    assert comparison_pairs(["mcp", "hybrid", "baseline"], "baseline") == [
        ("baseline", "hybrid"),
        ("baseline", "mcp"),
    ]
    assert comparison_pairs(["mcp", "hybrid", "baseline"], "baseline", all_pairs=True)[-1] == (
        "hybrid",
        "mcp",
    )


def test_family_comparisons_holm_over_pairs_and_metrics():
    table = family_comparisons(_trials(), ["reward"])
    assert table[["reference", "family"]].values.tolist() == [
        ["baseline", "hybrid"],
        ["baseline", "mcp"],
    ]
    hybrid, mcp = table.iloc[0], table.iloc[1]
    # hybrid - baseline: 8 positive deltas -> exact two-sided p = 2 / 2**8
    assert hybrid["tested"] and hybrid["wilcoxon_p"] == pytest.approx(2 / 256)
    assert hybrid["mean_delta"] == pytest.approx(7.5 / 8)
    # mcp - baseline: 1 non-zero delta: untested, out of Holm's family (m = 1)
    assert not mcp["tested"] and "non-zero paired deltas: 1 of 8" in mcp["reason"]
    assert hybrid["p_holm"] == pytest.approx(2 / 256) and math.isnan(mcp["p_holm"])
    every = family_comparisons(_trials(), ["reward"], all_pairs=True)
    last = every.iloc[-1]
    assert (last["reference"], last["family"]) == ("hybrid", "mcp")
    # mcp - hybrid: 7 negative deltas (one tie) -> p = 2 / 2**7; Holm over 2 tested rows:
    # sorted p = (1/128, 1/64): 2 * 1/128 = 1/64, then max(1/64, 1 * 1/64) = 1/64
    assert last["wilcoxon_p"] == pytest.approx(2 / 128)
    assert every["p_holm"].dropna().tolist() == pytest.approx([1 / 64, 1 / 64])


def test_friedman_and_the_comparison_table_by_hand():
    result = compare_families(_trials(), ["reward"], n_boot=500)
    fried = result.friedman.iloc[0]
    # ranks per task (baseline, hybrid, mcp): t0-t5 (1.5, 3, 1.5), t6 (1, 2.5, 2.5),
    # t7 (1.5, 3, 1.5) -> R = (11.5, 23.5, 13); 12/(8*3*4) * 853.5 - 3*8*4 = 10.6875;
    # ties: one pair per task, C = 1 - 8*6 / (8*3*8) = 0.75 -> Q = 14.25
    assert fried["tested"] and fried["n"] == 8 and fried["k"] == 3
    assert fried["Q"] == pytest.approx(14.25)
    assert fried["p_value"] == pytest.approx(math.exp(-14.25 / 2))
    table = result.table.set_index("config_family")
    assert table["letter"].to_dict() == {"baseline": "a", "hybrid": "b", "mcp": "c"}
    assert table["mean"].to_dict() == pytest.approx(
        {"baseline": 0.0, "hybrid": 0.9375, "mcp": 0.125}
    )
    assert table["n"].tolist() == [8, 8, 8]
    # pairs: hybrid > baseline (p 1/128) and hybrid > mcp (p 1/64), Holm 1/64 each < 0.05;
    # baseline vs mcp untested (1 non-zero delta)
    assert table["higher_than"].to_dict() == {"baseline": "", "hybrid": "a,c", "mcp": ""}
    assert table["best"].to_dict() == {"baseline": False, "hybrid": True, "mcp": False}
    assert (table.loc["baseline", "ci_low"], table.loc["baseline", "ci_high"]) == (0.0, 0.0)
    assert table.loc["hybrid", "ci_low"] <= 0.9375 <= table.loc["hybrid", "ci_high"]
    wide = result.wide().set_index("config_family")["reward"]
    assert wide["hybrid"].startswith("0.938 [") and wide["hybrid"].endswith("] ^a,c")
    assert wide["baseline"] == "0.000 [0.000, 0.000]"
    md = result.to_markdown()
    assert "| m1 | b | hybrid | **0.938** [" in md and "<sup>a,c</sup>" in md
    assert "Holm-adjusted over every pair and metric" in md and "p &lt; 0.05" in md
    assert "\\textbf{0.938}" in result.to_latex() and "$^{a,c}$" in result.to_latex()


def test_two_families_give_no_friedman_but_still_the_pair():
    two = {k: v for k, v in REWARDS.items() if k != "mcp"}
    result = compare_families(_trials(two), ["reward"], n_boot=100)
    row = result.friedman.iloc[0]
    assert not row["tested"] and "needs at least 3" in row["reason"]
    assert result.table.set_index("config_family")["higher_than"]["hybrid"] == "a"


def test_model_effects_and_the_difference_of_differences():
    m2 = {
        "baseline": [0, 0, 0, 0, 0, 0, 0, 0],
        "hybrid": [1, 0, 1, 0, 1, 0, 1, 0.5],
        "mcp": [0, 0, 0, 0, 0, 0, 1, 0],
    }
    trials = pd.concat([_trials(), _trials(m2, model="m2")], ignore_index=True)
    effects = model_effects(trials, ["reward"])
    hybrid = effects[effects["family"] == "hybrid"].set_index("model")
    assert hybrid["mean_delta"].to_dict() == pytest.approx({"m1": 7.5 / 8, "m2": 4.5 / 8})
    inter = model_interactions(trials, ["reward"]).set_index("family").loc["hybrid"]
    # delta_m2 - delta_m1 per task: (0, -1, 0, -1, 0, -1, 0, 0): mean -3/8, t interval
    dd = np.array([0, -1, 0, -1, 0, -1, 0, 0], dtype=float)
    from scipy import stats

    half = stats.t.ppf(0.975, 7) * dd.std(ddof=1) / math.sqrt(8)
    assert (inter["model_a"], inter["model_b"], inter["n"]) == ("m1", "m2", 8)
    assert inter["diff_of_diff"] == pytest.approx(-3 / 8)
    assert (inter["ci_low"], inter["ci_high"]) == pytest.approx((-3 / 8 - half, -3 / 8 + half))
    assert inter["tested"] and inter["ci_method"] == "t"
    mcp = model_interactions(trials, ["reward"]).set_index("family").loc["mcp"]
    assert not mcp["tested"] and "constant" in mcp["reason"]  # same effect in both models


# --------------------------------------------------------------------------- escaping

HOSTILE_FAMILY = "x & y_50% $z$ #1 {a} ~b ^c \\d"
HOSTILE_MODEL = "<b>m</b> | [x](javascript:alert(1))"


def test_latex_text_escapes_every_special():
    assert latex_text("&%$#_{}~^\\") == (
        "\\&\\%\\$\\#\\_\\{\\}\\textasciitilde{}\\textasciicircum{}\\textbackslash{}"
    )
    assert latex_text("a\nb\tc") == "a b c"


def _check_tabular(tex: str) -> list[list[str]]:
    """Parse the LaTeX table: balanced braces, & per row = columns - 1, no raw special."""
    unescaped = re.sub(r"\\[&%$#_{}]", "", tex)
    depth = 0
    for char in unescaped:
        depth += {"{": 1, "}": -1}.get(char, 0)
        assert depth >= 0
    assert depth == 0
    match = re.search(r"\\begin\{tabular\}\{([lcr]+)\}\n(.*?)\\end\{tabular\}", tex, re.S)
    assert match, "no tabular"
    columns = len(match.group(1))
    rows = []
    for line in match.group(2).splitlines():
        if line == "\\hline":
            continue
        assert line.endswith(" \\\\")
        body = line[: -len(" \\\\")]
        cells = re.split(r"(?<!\\)&", body)
        assert len(cells) == columns, line
        rows.append(cells)
    # what remains once escapes and the table's own markup are removed has no special
    rest = re.sub(r"\\[&%$#_{}]", "", tex)
    rest = re.sub(r"\\text(asciitilde|asciicircum|backslash)\{\}", "", rest)
    rest = re.sub(r"\$\^\{[a-z,]+\}\$|\$<\$", "", rest)
    rest = re.sub(r"(?<!\\)&", "", rest)
    rest = re.sub(r"\\(begin|end|textbf|caption|centering|hline)\b", "", rest)
    rest = rest.replace("\\\\", "")
    assert not set(rest) & set("%$#_~^\\"), sorted(set(rest) & set("%$#_~^\\"))
    return rows


def test_hostile_names_are_escaped_in_latex_and_markdown():
    names = {"baseline": "baseline", "hybrid": HOSTILE_FAMILY, "mcp": "mcp|pipe"}
    result = compare_families(_trials(model=HOSTILE_MODEL, names=names), ["reward", "passed"])
    tex = result.to_latex()
    rows = _check_tabular(tex)
    assert len(rows) == 4 and len(rows[0]) == 5  # header + 3 families; 3 + 2 metrics
    assert latex_text(HOSTILE_FAMILY) in tex and latex_text(HOSTILE_MODEL) in tex
    md = result.to_markdown()
    table_lines = [line for line in md.splitlines() if line.startswith("|")]
    assert all(line.count("|") == 6 for line in table_lines)  # 5 columns: no pipe leaks
    assert "<b>" not in md and "](javascript" not in md and HOSTILE_FAMILY not in md


# --------------------------------------------------------------------------- acceptance


def test_a_study_of_three_config_families_shows_every_pair_friedman_and_model_effects(
    tmp_path, capsys
):
    from retrieval_lib.report.pipeline import bundled_examples
    from retrieval_lib.report.study_report import read_manifest
    from retrieval_lib.study import load_evaluated

    found = bundled_examples()
    assert found is not None
    runs, tasks = found
    copy = tmp_path / "runs"
    shutil.copytree(runs, copy)
    run = copy / "official" / "csb_synth_haiku_20260301_091500"
    shutil.copytree(run / "mcp-remote-direct", run / "hybrid_v2")
    out = tmp_path / "out"
    argv = ["study", str(copy), "--tasks-root", str(tasks), "--out", str(out), "--no-report",
            "--config-map", "hybrid_v2=hybrid-local-direct"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    families = ["baseline-local-direct", "hybrid-local-direct", "mcp-remote-direct"]
    tex = (out / "study" / "tables" / "compare.tex").read_text(encoding="utf-8")
    rows = _check_tabular(tex)
    assert [r[2].strip() for r in rows[1:]] == [latex_text(f) for f in families]
    md = (out / "study" / "tables" / "compare.md").read_text(encoding="utf-8")
    assert all(f" {f} " in md for f in families)

    manifest = read_manifest(out / "study")
    study = load_evaluated(manifest["events_dirs"], config_map=manifest["config_map"])
    study = study.with_options(all_pairs=True, n_boot=200)
    pairs = study.family_comparisons()[["reference", "family"]].drop_duplicates()
    assert [tuple(p) for p in pairs.values] == [
        ("baseline-local-direct", "hybrid-local-direct"),
        ("baseline-local-direct", "mcp-remote-direct"),
        ("hybrid-local-direct", "mcp-remote-direct"),
    ]
    comparison = study.compare()
    assert {tuple(sorted(p)) for p in comparison.pairwise[["A", "B"]].values} == {
        ("baseline-local-direct", "hybrid-local-direct"),
        ("baseline-local-direct", "mcp-remote-direct"),
        ("hybrid-local-direct", "mcp-remote-direct"),
    }
    reward = comparison.friedman.set_index("dv").loc["reward"]
    assert reward["k"] == 3 and reward["n"] >= 3 and reward["tested"]
    effects = study.model_effects()
    assert set(effects["family"]) == {"hybrid-local-direct", "mcp-remote-direct"}
    assert set(effects["reference"]) == {"baseline-local-direct"}
    assert effects["model"].nunique() == 1


def test_the_parameters_reach_the_study_options_and_a_bad_reference_is_named():
    from retrieval_lib.errors import StatisticsError
    from retrieval_lib.report.params import check_schema
    from retrieval_lib.report.study_report import study_options

    values = check_schema({"reference_family": "mcp", "all_pairs": True}, "study")
    options = study_options(values)
    assert (options.reference_family, options.all_pairs) == ("mcp", True)
    assert study_options({"reference_family": ""}).reference_family is None
    with pytest.raises(
        StatisticsError, match="reference family 'mpc' not found; families: baseline, hybrid, mcp"
    ):
        family_comparisons(_trials(), ["reward"], reference="mpc")
    table = family_comparisons(_trials(), ["reward"], reference="mcp")
    assert table[["reference", "family"]].values.tolist() == [
        ["mcp", "baseline"],
        ["mcp", "hybrid"],
    ]


def _random_trials(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 400
    families = ["baseline-local-direct", "mcp-remote-direct", "mcp-remote-artifact"]
    reward = rng.choice([0.0, 0.5, 1.0, np.nan], size=n, p=[0.4, 0.1, 0.45, 0.05])
    return pd.DataFrame(
        {
            "trial_id": [f"t{i}" for i in range(n)],
            "task_name": [f"task-{i}" for i in rng.integers(0, 60, size=n)],
            "model": rng.choice(np.array(["m1", "m2", None], dtype=object), size=n),
            "config_family": rng.choice(families, size=n),
            "harness_version": rng.choice(np.array(["1", "2", None], dtype=object), size=n),
            "reward": reward,
            "passed": [None if np.isnan(r) else bool(r == 1.0) for r in reward],
            "file.recall": rng.random(n),
        }
    ).assign(config_name=lambda t: t["config_family"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shared_matches_give_what_matching_each_model_alone_gives(seed):
    from retrieval_lib.study.compare import comparison_pairs, family_matches

    trials = _random_trials(seed)
    metrics = ["reward", "passed", "file.recall"]
    families = sorted(trials["config_family"].unique())
    pairs = comparison_pairs(families, "baseline-local-direct", all_pairs=True)
    matches = family_matches(trials, pairs, metrics)
    for fn, kwargs in (
        (family_comparisons, {"all_pairs": True}),
        (model_effects, {}),
        (model_interactions, {}),
    ):
        alone = fn(trials, metrics, **kwargs)
        shared = fn(trials, metrics, matches=matches, **kwargs)
        assert len(alone) > 0
        pd.testing.assert_frame_equal(shared, alone, obj=fn.__name__)
