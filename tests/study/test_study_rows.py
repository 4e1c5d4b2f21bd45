"""The study's per-run tables written at evaluate time (issue 20, ``events.study_rows``).

The oracle is the document-decoding path (``loader._decoded_rows``, the reading code the
study used before; still the path of runs evaluated without the tables): on the bundled
example and on the csb corpus the trials, events and exclusions read from the tables
equal, column by column and type by type, the ones decoded from the documents.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from retrieval_lib.completion import read_record
from retrieval_lib.events.study_rows import STUDY_EVENTS_FILENAME, STUDY_TRIALS_FILENAME
from retrieval_lib.report.pipeline import bundled_examples
from retrieval_lib.study import loader

CSB = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "csb"


def _inputs(name: str) -> tuple[Path, Path]:
    if name == "csb":
        if not CSB.is_dir():
            pytest.skip("../shared/corpus/csb is not here")
        return CSB / "runs", CSB / "benchmarks"
    found = bundled_examples()
    if found is None:
        pytest.skip("the bundled example runs are missing")
    return found


@pytest.fixture(scope="module", params=["bundled", "csb"])
def evaluated(request, tmp_path_factory) -> list[Path]:
    runs, tasks = _inputs(request.param)
    out = tmp_path_factory.mktemp(f"rows-{request.param}")
    return loader.prepare_runs([runs], tasks, out=out).events_dirs


def _decoded(events_dirs, monkeypatch) -> loader.StudyTables:
    with monkeypatch.context() as patch:
        patch.setattr(loader, "_stored_rows", lambda *args: None)
        return loader.read_evaluated(events_dirs)


def _assert_same(a: loader.StudyTables, b: loader.StudyTables) -> None:
    for name in ("trials", "events", "exclusions"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)


def test_evaluate_records_the_study_tables_with_their_hashes(evaluated):
    for folder in evaluated:
        files = read_record(folder)["evaluate"]["files"]
        for name in (STUDY_EVENTS_FILENAME, STUDY_TRIALS_FILENAME):
            assert (folder / name).is_file()
            assert files[name]["size"] == (folder / name).stat().st_size
            assert len(files[name]["sha256"]) == 64


def test_the_tables_read_equal_the_documents_decoded(evaluated, monkeypatch):
    stored = loader.read_evaluated(evaluated)
    decoded = _decoded(evaluated, monkeypatch)
    _assert_same(stored, decoded)
    assert not stored.events.empty
    # every event row of every trial, and the first finder of each ground-truth file
    n_events = sum(
        len(doc["events"])
        for folder in evaluated
        for doc in map(_load, sorted(folder.rglob("*.retrieval_events.json")))
    )
    assert len(stored.events) == n_events


def test_the_events_hold_each_name_and_each_path_list_once(evaluated):
    """Memory (issue 20): the name columns are categoricals, equal path tuples are one
    object in a run; written (``plain_text``) they are the text columns they were."""
    from retrieval_lib.study.analysis import plain_text

    events = loader.read_evaluated(evaluated).events
    names = [c for c in events if isinstance(events[c].dtype, pd.CategoricalDtype)]
    assert {"trial_id", "run_id", "config_family", "tool", "tool_category"} <= set(names)
    for _, run in events.groupby("run_id"):
        targets = run["target_files"].tolist()
        assert len({id(t) for t in targets}) == len(set(targets)) < len(targets)
    plain = plain_text(events)
    for column in names:
        assert plain[column].dtype == "str"
        assert plain[column].tolist() == events[column].astype(object).tolist()


def _load(path: Path) -> dict:
    import json

    return json.loads(path.read_text(encoding="utf-8"))


def test_the_study_reads_no_document(evaluated, tmp_path, monkeypatch):
    """Without its documents (removed after evaluate) a run reads the same: the study
    reads the per-run tables, never the documents (the old path excluded every trial)."""
    before = loader.read_evaluated(evaluated)
    copies = []
    for folder in evaluated:
        copy = tmp_path / folder.parent.name / folder.name
        shutil.copytree(folder, copy)
        for doc in copy.rglob("*.retrieval_events.json"):
            doc.unlink()
        copies.append(copy)
    monkeypatch.setattr(loader, "load_document", _refuse)
    after = loader.read_evaluated(copies)
    _assert_same(after, before)


def _refuse(*args, **kwargs):
    raise AssertionError("the study decoded a document")


def test_a_run_evaluated_without_the_tables_is_read_from_its_documents(
    evaluated, tmp_path, monkeypatch
):
    """A run evaluated by older code (no study tables in its record) still reads, from
    its documents, the same tables."""
    import json

    expected = loader.read_evaluated(evaluated)
    copies = []
    for folder in evaluated:
        copy = tmp_path / folder.parent.name / folder.name
        shutil.copytree(folder, copy)
        record = read_record(copy)
        for name in (STUDY_EVENTS_FILENAME, STUDY_TRIALS_FILENAME):
            del record["evaluate"]["files"][name]
            (copy / name).unlink()
        (copy / "completion_record.json").write_text(json.dumps(record), encoding="utf-8")
        copies.append(copy)
    _assert_same(loader.read_evaluated(copies), expected)


def test_a_config_mapping_is_applied_when_read(evaluated, monkeypatch):
    """The tables carry no config family: it is the study's mapping, applied when read."""
    configs = sorted(set(loader.read_evaluated(evaluated).events["config_name"]))
    mapping = {configs[0]: "family-x"}
    stored = loader.read_evaluated(evaluated, mapping)
    with monkeypatch.context() as patch:
        patch.setattr(loader, "_stored_rows", lambda *args: None)
        decoded = loader.read_evaluated(evaluated, mapping)
    _assert_same(stored, decoded)
    chosen = stored.events[stored.events["config_name"] == configs[0]]
    assert not chosen.empty and set(chosen["config_family"]) == {"family-x"}


def test_evaluated_runs_given_to_the_study_are_checked_without_listing_documents(
    evaluated, monkeypatch
):
    """A folder of evaluated runs: each run is found from its events folder's record and
    summary, and checked from its record; no folder of documents is listed."""
    import os

    listed: list[str] = []
    scandir = os.scandir

    def recording(path="."):
        listed.append(os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", recording)
    prepared = loader.prepare_runs([evaluated[0].parent.parent], None)
    monkeypatch.undo()
    assert prepared.events_dirs == evaluated and prepared.given
    inside = [p for p in listed if "retrieval_events" in Path(p).parts]
    assert inside == []
