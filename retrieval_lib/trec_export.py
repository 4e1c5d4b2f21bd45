"""Export what the agents retrieved as TREC run and qrels files (``retrieval-lib export-trec``).

For every run and config family (:func:`retrieval_lib.study.families.family_of`),
``<run_id>/<family>.run`` (each trial's surfaced ranking, the one the ``file.*`` metrics
score, ``score = n_files - rank + 1`` so trec_eval's order is the same) and
``<run_id>/<family>.qrels`` (the ground-truth files of each trial whose ``file.*`` metrics
are computable, so trec_eval skips the others as the metrics do). ``qid`` is the task name,
or the trial name when a task has several trials; ``docno`` the file key. The format and
its rules: ``docs/contracts.md`` §7.

Examples
--------
>>> encode_field("src/my file.py")
'src/my%20file.py'
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_lib.events.document import iter_documents
from retrieval_lib.io import atomic_write_text, safe_join
from retrieval_lib.metrics.stages import TraceView, file_level_reason, has_usable_trace
from retrieval_lib.study.families import family_of

__all__ = ["ExportedFiles", "encode_field", "export_trec"]

_UNSAFE = re.compile(r"[%\s]")


def encode_field(text: str) -> str:
    """Percent-encode ``%`` and whitespace so ``text`` is one TREC field.

    Examples
    --------
    >>> encode_field("a b%c\\td")
    'a%20b%25c%09d'
    """
    return _UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), text)


@dataclass(frozen=True)
class ExportedFiles:
    """The two files written for one run and config family.

    Attributes
    ----------
    run_id, family
        The run and config family.
    run_path, qrels_path
        The TREC run and qrels files.
    n_queries
        Trials exported (qids of the run file, plus trials that retrieved nothing).
    n_judged
        Trials with file-level ground truth (qids of the qrels file).
    """

    run_id: str
    family: str
    run_path: Path
    qrels_path: Path
    n_queries: int
    n_judged: int


@dataclass
class _Trial:
    task: str
    trial: str
    config: str
    ranked: tuple[str, ...]
    ground_truth: tuple[str, ...] | None


def _trial_of(doc: Mapping[str, Any]) -> _Trial:
    prov = doc["provenance"]
    computable = file_level_reason(doc) is None
    truth = doc["ground_truth"]["files"] if computable else None
    ranked = TraceView.from_document(doc).ranked_files if has_usable_trace(doc) else ()
    return _Trial(
        task=str(prov["task_name"]),
        trial=str(prov.get("trial_name") or prov["task_name"]),
        config=str(prov["config_name"]),
        ranked=ranked,
        ground_truth=tuple(sorted(set(truth))) if truth else None,
    )


def _qids(trials: list[_Trial]) -> list[str]:
    per_task = Counter(trial.task for trial in trials)
    qids: list[str] = []
    seen: set[str] = set()
    for trial in trials:
        if per_task[trial.task] == 1:
            qid = trial.task
        elif trial.trial.startswith(trial.task + "__"):
            qid = trial.trial
        else:
            qid = f"{trial.task}__{trial.trial}"
        if qid in seen:
            qid = f"{qid}__{trial.config}"
        seen.add(qid)
        qids.append(qid)
    return qids


def export_trec(
    paths: Iterable[str | Path],
    out_dir: str | Path,
    *,
    config_map: Mapping[str, str] | None = None,
) -> list[ExportedFiles]:
    """Write a TREC run and qrels per run and config family of the documents under ``paths``.

    Parameters
    ----------
    paths
        Normalised runs: run folders, events folders, folders of runs or documents.
    out_dir
        Output folder (created); files go to ``<out_dir>/<run_id>/<family>.{run,qrels}``.
    config_map
        Extra raw config name → family entries (as ``--config-map``).

    Returns
    -------
    list of ExportedFiles
        One per run and family, sorted.

    Raises
    ------
    InputError
        No documents under ``paths``, or an unreadable document.
    """
    from retrieval_lib.errors import InputError

    groups: dict[tuple[str, str], list[_Trial]] = {}
    for _, doc in iter_documents(paths):
        prov = doc["provenance"]
        family = family_of(str(prov["config_name"]), config_map)
        groups.setdefault((str(prov["run_id"]), family), []).append(_trial_of(doc))
    if not groups:
        raise InputError("no retrieval-event documents found; run `retrieval-lib normalize` first")
    exported: list[ExportedFiles] = []
    for (run_id, family), trials in sorted(groups.items()):
        trials.sort(key=lambda t: (t.task, t.trial, t.config))
        tag = encode_field(f"{run_id}:{family}")
        run_lines: list[str] = []
        qrels_lines: list[str] = []
        for qid, trial in zip(_qids(trials), trials, strict=True):
            qid_field = encode_field(qid)
            n = len(trial.ranked)
            for rank, key in enumerate(trial.ranked, start=1):
                run_lines.append(f"{qid_field} Q0 {encode_field(key)} {rank} {n - rank + 1} {tag}")
            for key in trial.ground_truth or ():
                qrels_lines.append(f"{qid_field} 0 {encode_field(key)} 1")
        folder = safe_join(out_dir, run_id)
        run_path = atomic_write_text(
            safe_join(folder, f"{family}.run"), "".join(f"{line}\n" for line in run_lines)
        )
        qrels_path = atomic_write_text(
            safe_join(folder, f"{family}.qrels"), "".join(f"{line}\n" for line in qrels_lines)
        )
        exported.append(
            ExportedFiles(
                run_id=run_id,
                family=family,
                run_path=run_path,
                qrels_path=qrels_path,
                n_queries=len(trials),
                n_judged=sum(t.ground_truth is not None for t in trials),
            )
        )
    return exported
