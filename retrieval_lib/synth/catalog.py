"""Synthetic tasks: what each task asks, of which repositories, with which ground truth.

:func:`build_task` turns a task index into a :class:`TaskSpec` (name, suite, ground
truth), with one of eleven ground-truth kinds (:data:`GT_KINDS`);
:mod:`retrieval_lib.synth.task_files` writes its folder(s). The repositories and their
file contents are in :mod:`retrieval_lib.synth.repos`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from retrieval_lib.synth.repos import (
    ORG_REPOS,
    REPOS,
    RepoProfile,
    file_language,
    symbol_line,
)

__all__ = [
    "GT_KINDS",
    "GroundTruthChunk",
    "TaskSpec",
    "build_task",
]

#: Where each kind of ground truth is read from, and how much it is trusted.
_GT_SOURCES: dict[str, tuple[str | None, str | None]] = {
    "bare_list": ("tests/ground_truth.json", "high"),  # a JSON list (with a duplicate entry)
    "dict": ("tests/ground_truth.json", "high"),  # {files, symbols, expected_edit_files}
    "org": ("tests/ground_truth.json", "high"),  # {files: ["repo::path"], symbols[{..., repo}]}
    "defects": ("tests/expected_defects.json", "high"),  # a list with line ranges
    "defects_wrapped": ("tests/expected_defects.json", "high"),  # {"defects": [...]}
    "expected_changes": ("tests/expected_changes.json", "high"),  # {expected_files}
    "reference_patch": ("tests/reference_fix.patch", "high"),
    # split: task.toml in ccb_<x>/<task>/, the ground truth in csb_sdlc_<x>/<task>/
    "split": ("tests/ground_truth.json", "high"),
    "solve_sh": ("solution/solve.sh", "medium"),  # with an embedded diff
    "none": (None, None),  # no retrieval ground truth (a checklist verifier)
    # curator: chunks too, and tests/ground_truth_meta.json beside
    "curator": ("tests/ground_truth_agent.json", "medium"),
}

#: Ground-truth kinds, cycled over task indices (``index % len(GT_KINDS)``).
GT_KINDS: tuple[str, ...] = tuple(_GT_SOURCES)

_KIND_SETUP: dict[str, tuple[str, str, str, str]] = {
    # kind: (suite, topic, reward_type, output)
    "bare_list": ("csb_sdlc_design", "impact", "f1", "submission"),
    "dict": ("csb_sdlc_feature", "filter-support", "binary", "edit"),
    "org": ("csb_org_crossrepo", "routeconfig-dep-chain", "f1", "submission"),
    "defects": ("csb_sdlc_debug", "review-defects", "f1", "review"),
    "defects_wrapped": ("csb_sdlc_test", "code-review", "f1", "review"),
    "expected_changes": ("csb_sdlc_feature", "config-option", "binary", "edit"),
    "reference_patch": ("csb_sdlc_fix", "bugfix", "binary", "edit"),
    "split": ("ccb_design", "dep-trace", "partial_credit", "submission"),
    "solve_sh": ("csb_sdlc_refactor", "rename-refactor", "binary", "edit"),
    "none": ("ccb_test", "context-window-search", "checklist", "answer"),
    "curator": ("csb_sdlc_understand", "curated-context", "f1", "submission"),
}

_KIND_REPOS: dict[str, tuple[str, ...]] = {
    "bare_list": ("django", "kafka"),
    "dict": ("django", "kafka", "istio"),
    "org": ORG_REPOS,
    "defects": ("kafka", "llama.cpp", "django"),
    "defects_wrapped": ("llama.cpp", "istio"),
    "expected_changes": ("istio", "kafka", "django"),
    "reference_patch": ("django", "llama.cpp"),
    "split": ("istio", "django"),
    "solve_sh": ("kafka", "istio", "django"),
    "none": ("llama.cpp",),
    "curator": ("kafka", "django", "istio"),
}


@dataclass(frozen=True)
class GroundTruthChunk:
    """A line range of a ground-truth file (from expected defects)."""

    repo: str
    path: str
    line_start: int
    line_end: int
    defect_type: str | None
    annotation: str | None


@dataclass
class TaskSpec:
    """One synthetic task: identity, repositories and ground truth."""

    index: int
    name: str
    kind: str
    suite: str
    task_dirs: tuple[str, ...]
    """Folders (relative to ``benchmarks/``) holding the task's files, task.toml first."""
    repos: tuple[RepoProfile, ...]
    symbol: str
    reward_type: str
    output: str
    """What the agent produces: ``submission``, ``edit``, ``review`` or ``answer``."""
    relevant: tuple[tuple[str, str], ...]
    """(repo short name, path) of the files that matter, ground truth or not."""
    edit_files: tuple[tuple[str, str], ...]
    chunks: tuple[GroundTruthChunk, ...] = ()
    gt_source: str | None = None
    gt_confidence: str | None = None
    time_limit_sec: int = 900
    instruction: str = ""

    @property
    def is_org(self) -> bool:
        return self.kind == "org"

    def key(self, repo: str, path: str) -> str:
        """Normalised ground-truth key of a file of this task (see contracts §2): lowercase
        repository-relative path, ``repo::path`` in an org task.

        Examples
        --------
        >>> build_task(2, 0).key("istio", "pilot/pkg/xds/RDS.go")
        'istio::pilot/pkg/xds/rds.go'
        """
        return f"{repo.lower()}::{path.lower()}" if self.is_org else path.lower()

    @property
    def gt_files(self) -> list[str]:
        """Normalised, deduplicated, sorted ground-truth keys (empty without ground truth)."""
        if self.kind == "none":
            return []
        return sorted({self.key(r, p) for r, p in self.relevant})


def build_task(index: int, seed: int) -> TaskSpec:
    """The task at ``index`` of a synthetic benchmark (deterministic in ``seed``).

    Examples
    --------
    >>> build_task(0, 0).kind
    'bare_list'
    """
    kind = GT_KINDS[index % len(GT_KINDS)]
    rng = random.Random(f"task:{seed}:{index}")
    suite, topic, reward_type, output = _KIND_SETUP[kind]
    candidates = _KIND_REPOS[kind]
    if kind == "org":
        repos = tuple(REPOS[name] for name in ORG_REPOS)
    else:
        repos = (REPOS[candidates[(index // len(GT_KINDS)) % len(candidates)]],)
    main = repos[0]
    symbol = rng.choice(main.symbols)
    number = index // len(GT_KINDS) + 1
    name = f"{main.short.replace('.', '')}-{topic}-{number:03d}"
    split = (f"ccb_design/{name}", f"csb_sdlc_design/{name}")
    task_dirs = split if kind == "split" else (f"{suite}/{name}",)

    relevant = _relevant_files(rng, kind, repos)
    edit_files: tuple[tuple[str, str], ...] = ()
    if output == "edit":
        code = [rp for rp in relevant if file_language(REPOS[rp[0]], rp[1]) != "text"]
        edit_files = tuple((code or relevant)[: max(1, min(2, len(code) or 1))])
        if kind == "dict":
            edit_files = edit_files[:1]
    chunks = _gt_chunks(rng, kind, relevant, symbol)
    gt_source, confidence = _GT_SOURCES[kind]
    if kind in ("expected_changes", "reference_patch", "solve_sh"):
        # Patch-like sources name exactly the edited files.
        relevant = list(edit_files)
    task = TaskSpec(
        index=index,
        name=name,
        kind=kind,
        suite=task_dirs[0].split("/")[0],
        task_dirs=task_dirs,
        repos=repos,
        symbol=symbol,
        reward_type=reward_type,
        output=output,
        relevant=tuple(relevant),
        edit_files=edit_files,
        chunks=chunks,
        gt_source=gt_source,
        gt_confidence=confidence,
        time_limit_sec=900 if kind != "none" else 1800,
    )
    task.instruction = _instruction(task)
    return task


def _relevant_files(
    rng: random.Random, kind: str, repos: tuple[RepoProfile, ...]
) -> list[tuple[str, str]]:
    """The task's relevant ``(repo, path)`` files: two or three per repository of an org
    task, else two to five of the one repository (code only when defects or edits)."""
    relevant: list[tuple[str, str]] = []
    if kind == "org":
        for profile in repos:
            for path in rng.sample(profile.files, 2 if profile.short != "istio" else 3):
                relevant.append((profile.short, path))
        return relevant
    main = repos[0]
    count = rng.randint(2, 5)
    pool = main.files
    if kind not in ("bare_list", "split", "none"):
        # Defects and edits live in code, not in docs.
        pool = tuple(p for p in main.files if file_language(main, p) != "text")
    return [(main.short, path) for path in rng.sample(pool, count)]


def _gt_chunks(
    rng: random.Random, kind: str, relevant: list[tuple[str, str]], symbol: str
) -> tuple[GroundTruthChunk, ...]:
    """Line ranges of the ground truth: a defect around ``symbol`` in each relevant file,
    or (curator tasks) the symbol and its callers in the first two."""
    if kind in ("defects", "defects_wrapped"):
        made = []
        for number_in_task, (repo, path) in enumerate(relevant):
            centre = symbol_line(REPOS[repo], path, symbol)
            made.append(
                GroundTruthChunk(
                    repo,
                    path,
                    max(1, centre - rng.randint(1, 4)),
                    centre + rng.randint(2, 9),
                    rng.choice(("null-deref", "off-by-one", "race-condition", "resource-leak")),
                    f"Defect D{number_in_task + 1} around {symbol}",
                )
            )
        return tuple(made)
    if kind == "curator":
        return tuple(
            GroundTruthChunk(
                repo,
                path,
                max(1, symbol_line(REPOS[repo], path, symbol) - 2),
                symbol_line(REPOS[repo], path, symbol) + rng.randint(4, 12),
                None,
                f"{symbol} and its callers",
            )
            for repo, path in relevant[:2]
        )
    return ()


def _instruction(task: TaskSpec) -> str:
    repo = task.repos[0]
    if task.kind == "none":
        return (
            f"# Find the answer in the {repo.short} project\n\n"
            f"Find the pull request that changed how `{task.symbol}` handles the context "
            "window for llama 3.1 models. Reply with the PR number and its title.\n\n"
            "Write your answer as JSON with the keys `pr_number` and `title`.\n"
        )
    intro = {
        "submission": (
            f"List every file that defines, overrides, calls or documents `{task.symbol}` "
            "and write the repository-relative paths to `/workspace/submission.json` "
            "as a JSON array."
        ),
        "edit": (
            f"Change `{task.symbol}` as described below and update every caller so the "
            "test suite passes. Keep the public behaviour otherwise unchanged."
        ),
        "review": (
            f"Review the recent changes around `{task.symbol}`. Report each defect you find "
            "in `/workspace/review.json` as a list of objects with `file`, `line` and "
            "`description`."
        ),
    }[task.output]
    repos = ", ".join(f"`{profile.upstream}`" for profile in task.repos)
    return (
        f"# {task.name}\n\n"
        f"Repository: {repos}\n\n"
        f"## Task\n\n{intro}\n\n"
        "## Notes\n\n"
        "- Explore the code base before answering; the workspace is at `/workspace`.\n"
        "- Do not modify tests unless the task asks for it.\n"
    )
