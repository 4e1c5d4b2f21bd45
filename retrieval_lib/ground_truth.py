"""Ground truth of a task, read from its task-definition folders with a priority chain.

The first source in the chain that yields at least one file decides ``files`` (and its
``source`` and ``confidence``); later sources are not merged in. Sources, in order:

====  ==========================================  ==========  ===============================
 #    file (relative to a task folder)             confidence  gives
====  ==========================================  ==========  ===============================
 1    ``tests/ground_truth.json``                  high [1]_   files (or chain ``steps``),
                                                               symbols, edit files, chunks
 1b   ``tests/ground_truth_agent.json`` (curator)  meta [2]_   files, symbols, chunks
 1c   ``tests/oracle_answer.json`` (org tasks)     high        files, symbols
 1d   ``tests/task_spec.json`` (org tasks)         high        files (``artifacts.oracle.
                                                               required_files``), symbols
 1e   ``tests/oracle_answer_*.json`` (curator)     meta [2]_   files, symbols
 2    ``tests/expected_defects.json``              high        files, chunks
 3    ``tests/expected_changes.json``              high        files, edit files
 4    ``tests/reference_fix.patch``,               high        files, edit files, chunks
      ``tests/expected.diff``,
      ``tests/expected.patch``
 5    ``solution/solve.sh`` (embedded diff)        medium      files, edit files, chunks
 6    ``instruction.md``                           medium      files (path extraction)
 6b   ``tests/test.sh``                            low         files (path extraction)
====  ==========================================  ==========  ===============================

.. [1] ``ground_truth.json`` may state its own ``confidence`` (high/medium/low).
.. [2] ``tests/ground_truth_meta.json`` describes the curator's output: its
   ``ground_truth_confidence`` and ``ground_truth_source`` apply to the ``*_agent.json``
   files (confidence ``medium`` without a meta). A meta without a companion file list adds
   only a warning (its note) and the chain continues.

Other rules:

* ``files`` are path keys (:func:`retrieval_lib.paths.normalize_path`), deduplicated and
  sorted; placeholders (``""``, ``"..."``, ``"TODO"``, ``"<path>"``, ``path/to/...``) are
  dropped with a warning. Entries may be strings (``"path"``, ``"repo::path"``) or objects
  (``{"repo", "path"}``, ``{"file"}``, ``{"filename"}``).
* ``expected_edit_files`` come only from edit sources of high confidence, first found in
  this order: ``ground_truth.json``'s own ``expected_edit_files`` (and the curator file's
  when its meta says high), ``expected_changes.json``, the patches, the gold patch of
  ``solve.sh``. ``None`` when none exists. They do not have to come from the source that
  decided ``files``.
* ``symbols`` come from the source that decided ``files``, else from the first of
  ``ground_truth.json``, the curator file, ``oracle_answer*.json`` and ``task_spec.json``
  that has any. Their ``file`` is a plain path key (or ``None``); ``repo`` is kept as written.
* ``chunks`` come from the source that decided ``files``, else from the first later source
  that has line ranges, keeping only chunks of files in ``files``. ``None`` when none.
* A malformed or unreadable source file is skipped with a warning and the chain continues;
  only a task folder that does not exist or cannot be listed raises
  :class:`~retrieval_lib.errors.GroundTruthError`.
* When a task is split over several folders (``ccb_design/<task>`` and
  ``csb_sdlc_design/<task>``) each relative file is taken from the first folder (in the
  order given) that has it. Nothing is cached: every call reads the files again.

One short reader per source, in chain order, plus a per-process cache of the result;
reading paths out of texts (diffs, prose) is :mod:`retrieval_lib.task_text`.
"""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase as fnmatch
from pathlib import Path
from typing import Any

from retrieval_lib.errors import GroundTruthError
from retrieval_lib.io import file_kind, lies_outside, os_reason, read_regular_bytes
from retrieval_lib.paths import GroundTruthMatcher, normalize_path
from retrieval_lib.runs import without_lone_surrogates
from retrieval_lib.safe_text import describe_value
from retrieval_lib.task_text import (
    embedded_diffs,
    extract_paths_from_text,
    is_placeholder,
    parse_unified_diff,
)

__all__ = [
    "CONFIDENCE_LEVELS",
    "GroundTruth",
    "load_ground_truth",
    "load_ground_truth_cached",
]

CONFIDENCE_LEVELS = ("high", "medium", "low")


_GT_JSON = "tests/ground_truth.json"
_GT_AGENT = "tests/ground_truth_agent.json"
_GT_META = "tests/ground_truth_meta.json"
_ORACLE = "tests/oracle_answer.json"
_TASK_SPEC = "tests/task_spec.json"
_DEFECTS = "tests/expected_defects.json"
_CHANGES = "tests/expected_changes.json"
_PATCHES = ("tests/reference_fix.patch", "tests/expected.diff", "tests/expected.patch")
_SOLVE = "solution/solve.sh"
_INSTRUCTION = "instruction.md"
_TEST_SH = "tests/test.sh"


@dataclass
class GroundTruth:
    """Ground truth of one task.

    Attributes
    ----------
    files
        Normalised path keys, deduplicated and sorted; empty when no source yields files.
    symbols
        ``{"file": key | None, "symbol": str, "repo": str | None}`` records.
    expected_edit_files
        Files a correct solution edits, only from high-confidence edit sources; ``None``
        when not inferable.
    chunks
        ``{"file", "line_start", "line_end", "annotation"}`` line ranges; ``None`` when none.
    source
        Relative file name that decided ``files`` (``"tests/ground_truth.json"``).
    confidence
        ``"high"``, ``"medium"``, ``"low"``, or ``None`` without files.
    task_dirs
        Task folders read (relative to ``tasks_root`` when given), in lookup order.
    warnings
        Everything skipped or doubtful, one sentence each.
    origin
        The curator's ``ground_truth_source`` (e.g. ``"curator_agent"``) when a
        ``ground_truth_meta.json`` applied to the deciding source.
    """

    files: list[str] = field(default_factory=list)
    symbols: list[dict[str, Any]] = field(default_factory=list)
    expected_edit_files: list[str] | None = None
    chunks: list[dict[str, Any]] | None = None
    source: str | None = None
    confidence: str | None = None
    task_dirs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    origin: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``ground_truth`` block of an event document (optional keys only when known)."""
        block: dict[str, Any] = {
            "files": list(self.files),
            "symbols": [dict(s) for s in self.symbols],
            "source": self.source,
            "confidence": self.confidence,
            "task_dir": list(self.task_dirs),
        }
        if self.expected_edit_files is not None:
            block["expected_edit_files"] = list(self.expected_edit_files)
        if self.chunks:
            block["chunks"] = [dict(c) for c in self.chunks]
        return block


@dataclass
class _Candidate:
    """What one source yields (before the chain picks)."""

    source: str
    confidence: str
    files: list[str] = field(default_factory=list)
    symbols: list[dict[str, Any]] = field(default_factory=list)
    chunks: list[dict[str, Any]] = field(default_factory=list)
    edit_files: list[str] | None = None
    origin: str | None = None


class _TaskFiles:
    """Resolve relative file names across the folders of one (possibly split) task.

    Each folder's top level, ``tests/`` and ``solution/`` are listed once, so looking a
    source up is a set lookup rather than a file-system call.
    """

    def __init__(self, task_dirs: Sequence[Path], warnings: list[str]) -> None:
        self.dirs = list(task_dirs)
        self.warnings = warnings
        self.read_paths: list[Path] = []  # every file read (the cache's fingerprint)
        self.listed: list[Path] = []  # every folder listed (the cache's fingerprint)
        self.listing: list[set[str]] = []
        for folder in self.dirs:
            try:
                self.listed.append(folder)
                names = self._list(folder, "")
            except OSError as exc:
                raise GroundTruthError(
                    f"task folder {folder} cannot be read: {exc.strerror or exc}"
                ) from exc
            for sub in ("tests", "solution"):
                if sub in names:
                    try:
                        self.listed.append(folder / sub)
                        names |= self._list(folder / sub, sub + "/")
                    except OSError as exc:
                        warnings.append(f"{sub}/ cannot be listed ({exc.strerror or exc})")
            self.listing.append(names)

    def _list(self, folder: Path, prefix: str) -> set[str]:
        """File names (and bare sub-folder names) directly in ``folder``; an entry that
        cannot be inspected (a symlink loop) or is neither a regular file nor a folder (a
        FIFO, a symlink to nothing) is skipped with a warning, its siblings still listed."""
        names: set[str] = set()
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    if entry.is_file():
                        names.add(prefix + entry.name)
                        continue
                    if entry.is_dir():
                        if not prefix:
                            names.add(entry.name)
                        continue
                    mode = os.stat(entry.path).st_mode
                except OSError as exc:
                    self.warnings.append(f"{prefix}{entry.name} skipped ({os_reason(exc)})")
                    continue
                self.warnings.append(f"{prefix}{entry.name} skipped ({file_kind(mode)}, not read)")
        return names

    def find(self, relative: str) -> Path | None:
        found = [
            (d, d / relative)
            for d, names in zip(self.dirs, self.listing, strict=True)
            if relative in names
        ]
        if len(found) > 1:
            try:
                differ = len({self._read(path) for _, path in found}) > 1
            except OSError:
                differ = True
            if differ:
                self.warnings.append(
                    f"{relative} differs between task folders "
                    f"{', '.join(d.parent.name + '/' + d.name for d, _ in found)}; "
                    f"using the one in {found[0][0].parent.name}/{found[0][0].name}"
                )
        return found[0][1] if found else None

    def _read(self, path: Path) -> bytes:
        self.read_paths.append(path)
        return read_regular_bytes(path)

    def glob(self, pattern: str) -> list[str]:
        """Relative names matching ``pattern`` in any folder, sorted, without duplicates."""
        return sorted({n for names in self.listing for n in names if fnmatch(n, pattern)})

    def read_text(self, relative: str) -> str | None:
        """The file's text (a UTF-8 byte order mark dropped), or ``None`` with a warning.

        A file whose real location lies outside its task folder (a symlink out) is not
        read; bytes that are not UTF-8 are replaced, with a warning.
        """
        path = self.find(relative)
        if path is None:
            return None
        folder = path.parents[relative.count("/")]
        try:
            if lies_outside(path, folder):
                self.warnings.append(f"{relative} is a symlink out of the task folder; not read")
                return None
            data = self._read(path)
        except (OSError, RuntimeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            self.warnings.append(f"{relative} cannot be read ({reason}); skipped")
            return None
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            self.warnings.append(
                f"{relative} is not valid UTF-8 ({exc.reason} at byte {exc.start}); "
                "undecodable bytes replaced"
            )
            return data.decode("utf-8-sig", errors="replace")

    def read_json(self, relative: str) -> Any:
        """Parsed JSON, or ``None`` when missing or malformed (with a warning)."""
        text = self.read_text(relative)
        if text is None:
            return None
        text, surrogates = without_lone_surrogates(text)
        if surrogates:
            self.warnings.append(
                f"{relative} holds {surrogates} escaped lone surrogate(s); replaced by U+FFFD"
            )
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            self.warnings.append(
                f"{relative} is not valid JSON ({exc.msg} at line {exc.lineno}); skipped"
            )
            return None
        except (RecursionError, ValueError) as exc:  # nesting too deep, huge integers
            reason = "nested too deeply" if isinstance(exc, RecursionError) else exc
            self.warnings.append(f"{relative} is not usable JSON ({reason}); skipped")
            return None


# --------------------------------------------------------------------------- entries


def _first_text(entry: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The value of the first of ``keys`` whose value is a string."""
    return next((entry[k] for k in keys if isinstance(entry.get(k), str)), None)


def _entry_path_and_repo(entry: Any) -> tuple[str | None, str | None]:
    if isinstance(entry, str):
        return entry, None
    if isinstance(entry, dict):
        path = _first_text(entry, ("path", "file", "filename", "file_path", "filepath"))
        return path, _first_text(entry, ("repo", "repository")) or None
    return None, None


def _keys_from_entries(entries: Any, relative: str, warnings: list[str]) -> list[str]:
    """Normalise a list of file entries; report placeholders and unusable entries."""
    if not isinstance(entries, list):
        if entries is not None:
            warnings.append(f"{relative}: file list is a {type(entries).__name__}; skipped")
        return []
    keys: list[str] = []
    dropped: list[str] = []
    for entry in entries:
        raw, repo = _entry_path_and_repo(entry)
        if raw is None:
            dropped.append(repr(entry)[:40])
            continue
        key = None if is_placeholder(raw) else normalize_path(raw, repo=repo)
        if key is None:
            dropped.append(repr(raw))
            continue
        keys.append(key)
    if dropped:
        warnings.append(
            f"{relative}: dropped {len(dropped)} placeholder or non-repository entr"
            f"{'y' if len(dropped) == 1 else 'ies'} ({', '.join(dropped[:5])})"
        )
    return keys


def _symbols_from(entries: Any) -> list[dict[str, Any]]:
    if not isinstance(entries, list):
        return []
    symbols = []
    for entry in entries:
        if isinstance(entry, str) and entry.strip():
            symbols.append({"file": None, "symbol": entry.strip(), "repo": None})
        elif isinstance(entry, dict):
            name = entry.get("symbol") or entry.get("name")
            if not isinstance(name, str) or not name.strip():
                continue
            raw_file, repo = _entry_path_and_repo(entry)  # reads no "name" or "symbol"
            file_key = normalize_path(raw_file) if raw_file else None
            symbols.append({"file": file_key, "symbol": name.strip(), "repo": repo})
    return symbols


#: Largest line number kept: a document stores 64-bit integers only.
_MAX_LINE = 2**63 - 1


def _as_int(value: Any) -> int | None:
    """A line number from an int, a whole float or a digit string; ``None`` otherwise.

    Values beyond :data:`_MAX_LINE` come back as they are (the caller warns about them);
    a digit string too long to be any line number is taken as ``_MAX_LINE + 1``.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        digits = value.strip().lstrip("0") or "0"
        return int(digits) if len(digits) <= 19 else _MAX_LINE + 1
    return None


def _chunks_from(entries: Any, relative: str, warnings: list[str]) -> list[dict[str, Any]]:
    """Line-range records (``line_start``/``line_end``; ``start_line``/``line`` accepted).

    A range with a line number below 0 or beyond 2**63 - 1 (``1e30``) is skipped with a
    warning: no file has such a line, and a document could not store it.
    """
    if not isinstance(entries, list):
        return []
    chunks = []
    skipped = out_of_range = 0
    for entry in entries:
        if not isinstance(entry, dict):
            skipped += 1
            continue
        raw, repo = _entry_path_and_repo(entry)
        key = normalize_path(raw, repo=repo) if raw and not is_placeholder(raw) else None
        start = _as_int(entry.get("line_start", entry.get("start_line", entry.get("line"))))
        end = _as_int(entry.get("line_end", entry.get("end_line")))
        if key is None or start is None:
            skipped += 1
            continue
        if any(n is not None and not 0 <= n <= _MAX_LINE for n in (start, end)):
            out_of_range += 1
            continue
        end = start if end is None else end
        if end < start:
            start, end = end, start
        annotation = _first_text(entry, ("annotation", "defect_type", "description"))
        chunks.append({"file": key, "line_start": start, "line_end": end, "annotation": annotation})
    if skipped:
        warnings.append(f"{relative}: skipped {skipped} line range(s) without file or start line")
    if out_of_range:
        warnings.append(
            f"{relative}: skipped {out_of_range} line range(s) with a line number out of "
            "range (below 0 or beyond 2**63 - 1)"
        )
    return chunks


def _confidence(value: Any, default: str) -> str:
    if isinstance(value, str) and value.strip().lower() in CONFIDENCE_LEVELS:
        return value.strip().lower()
    return default


# --------------------------------------------------------------------------- sources


def _from_ground_truth_json(
    data: Any, relative: str, default_confidence: str, warnings: list[str]
) -> _Candidate:
    if isinstance(data, list):
        files = _keys_from_entries(data, relative, warnings)
        return _Candidate(source=relative, confidence=default_confidence, files=files)
    if not isinstance(data, dict):
        warnings.append(f"{relative}: expected an object or a list, got {type(data).__name__}")
        return _Candidate(source=relative, confidence=default_confidence)
    confidence = _confidence(data.get("confidence"), default_confidence)
    candidate = _from_oracle(data, relative, confidence, warnings)
    candidate.chunks = _chunks_from(data.get("chunks"), relative, warnings)
    if "files" not in data:
        # dependency-chain tasks: {"steps": [{"repo", "file", "line", ...}]}
        steps = next((data[k] for k in ("steps", "chain") if isinstance(data.get(k), list)), None)
        if steps is not None:
            entries = [s for s in steps if isinstance(s, dict)]
            candidate.files = _keys_from_entries(entries, relative, warnings)
            candidate.chunks = candidate.chunks or [
                c for c in _chunks_from(entries, relative, []) if c["file"] in candidate.files
            ]
    if "expected_edit_files" in data:
        edits = _keys_from_entries(data.get("expected_edit_files"), relative, warnings)
        candidate.edit_files = edits or None
    return candidate


def _from_oracle(data: Any, relative: str, confidence: str, warnings: list[str]) -> _Candidate:
    """``files`` and ``symbols`` of an object (``oracle_answer*.json``, ``ground_truth.json``)."""
    candidate = _Candidate(source=relative, confidence=confidence)
    if not isinstance(data, dict):
        warnings.append(f"{relative}: expected an object, got {type(data).__name__}")
        return candidate
    if "files" in data and data["files"] is None:
        warnings.append(f"{relative}: files is null; no file list")
    candidate.files = _keys_from_entries(data.get("files", []), relative, warnings)
    candidate.symbols = _symbols_from(data.get("symbols"))
    return candidate


def _from_task_spec(data: Any, relative: str, warnings: list[str]) -> _Candidate:
    candidate = _Candidate(source=relative, confidence="high")
    if not isinstance(data, dict):
        warnings.append(f"{relative}: expected an object, got {type(data).__name__}")
        return candidate
    artifacts = data.get("artifacts")
    oracle = artifacts.get("oracle") if isinstance(artifacts, dict) else None
    if not isinstance(oracle, dict):
        return candidate
    candidate.files = _keys_from_entries(oracle.get("required_files", []), relative, warnings)
    candidate.symbols = _symbols_from(oracle.get("required_symbols"))
    return candidate


def _from_defects(data: Any, relative: str, warnings: list[str]) -> _Candidate:
    candidate = _Candidate(source=relative, confidence="high")
    if isinstance(data, dict):
        data = data.get("defects")
    if not isinstance(data, list):
        warnings.append(f"{relative}: expected a list of defects or {{'defects': [...]}}")
        return candidate
    candidate.files = _keys_from_entries(
        [d for d in data if isinstance(d, dict)], relative, warnings
    )
    candidate.chunks = _chunks_from(data, relative, warnings)
    return candidate


def _from_changes(data: Any, relative: str, warnings: list[str]) -> _Candidate:
    candidate = _Candidate(source=relative, confidence="high")
    entries = data.get("expected_files") if isinstance(data, dict) else data
    candidate.files = _keys_from_entries(entries, relative, warnings)
    candidate.edit_files = list(candidate.files) or None
    return candidate


def _from_diff_text(text: str, relative: str, confidence: str, warnings: list[str]) -> _Candidate:
    problems: list[str] = []
    files, chunks = parse_unified_diff(text, problems)
    warnings.extend(f"{relative}: {problem}" for problem in problems)
    return _Candidate(
        source=relative,
        confidence=confidence,
        files=files,
        chunks=chunks,
        edit_files=list(files) or None,
    )


def _meta_note(meta: dict[str, Any]) -> str:
    return ", ".join(
        f"{key}={meta[key] if isinstance(meta[key], str) else describe_value(meta[key])}"
        for key in ("ground_truth_source", "ground_truth_confidence", "files_count")
        if key in meta
    )


def _candidates(files: _TaskFiles, warnings: list[str]) -> Iterable[_Candidate]:
    """Every source in chain order (lazily: the caller stops at the first with files)."""
    meta = files.read_json(_GT_META)
    if meta is not None and not isinstance(meta, dict):
        warnings.append(f"{_GT_META}: expected an object; ignored")
        meta = None
    raw_confidence = (meta or {}).get("ground_truth_confidence")
    curator_confidence = _confidence(raw_confidence, "medium")
    if raw_confidence is not None and _confidence(raw_confidence, "") == "":
        warnings.append(
            f"{_GT_META}: unknown ground_truth_confidence {describe_value(raw_confidence)}; "
            "using 'medium'"
        )
    curator_origin = (meta or {}).get("ground_truth_source")
    if not isinstance(curator_origin, str):
        curator_origin = None
    curator_files_seen = False

    data = files.read_json(_GT_JSON)
    if data is not None:
        yield _from_ground_truth_json(data, _GT_JSON, "high", warnings)

    data = files.read_json(_GT_AGENT)
    if data is not None:
        curator_files_seen = True
        candidate = _from_ground_truth_json(data, _GT_AGENT, curator_confidence, warnings)
        candidate.confidence = curator_confidence  # the meta, not the file, rates the curator
        candidate.origin = curator_origin
        if candidate.confidence != "high":
            candidate.edit_files = None  # edit files only from high-confidence sources
        yield candidate

    data = files.read_json(_ORACLE)
    if data is not None:
        yield _from_oracle(data, _ORACLE, "high", warnings)

    data = files.read_json(_TASK_SPEC)
    if data is not None:
        yield _from_task_spec(data, _TASK_SPEC, warnings)

    for relative in files.glob("tests/oracle_answer*.json"):
        if relative == _ORACLE:
            continue
        data = files.read_json(relative)
        if data is not None:
            curator_files_seen = True
            candidate = _from_oracle(data, relative, curator_confidence, warnings)
            candidate.origin = curator_origin
            yield candidate

    if meta is not None and not curator_files_seen:
        warnings.append(
            f"{_GT_META} describes curator ground truth ({_meta_note(meta)}) but no curator "
            "file list (ground_truth_agent.json, oracle_answer_*.json) exists; "
            "continuing down the chain"
        )

    for relative, read in ((_DEFECTS, _from_defects), (_CHANGES, _from_changes)):
        data = files.read_json(relative)
        if data is not None:
            yield read(data, relative, warnings)

    for relative in _PATCHES:
        text = files.read_text(relative)
        if text is not None:
            candidate = _from_diff_text(text, relative, "high", warnings)
            if not candidate.files:
                warnings.append(f"{relative}: no file headers found in the diff")
            yield candidate

    text = files.read_text(_SOLVE)
    if text is not None:
        diffs = embedded_diffs(text)
        if diffs:
            yield _from_diff_text("\n".join(diffs), _SOLVE, "medium", warnings)

    text = files.read_text(_INSTRUCTION)
    if text is not None:
        yield _Candidate(_INSTRUCTION, "medium", files=extract_paths_from_text(text))

    text = files.read_text(_TEST_SH)
    if text is not None:
        yield _Candidate(_TEST_SH, "low", files=extract_paths_from_text(text))


def _relative_dir(folder: Path, tasks_root: Path | None) -> str:
    if tasks_root is not None:
        relative = os.path.relpath(os.path.abspath(folder), os.path.abspath(tasks_root))
        if relative != ".." and not relative.startswith(".." + os.sep):
            return Path(relative).as_posix()
    return folder.as_posix()


def _dedupe_chunks(chunks: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    unique: dict[tuple[str, int, int], dict[str, Any]] = {}
    for chunk in chunks:
        key = (chunk["file"], chunk["line_start"], chunk["line_end"])
        if key not in unique or (unique[key]["annotation"] is None and chunk["annotation"]):
            unique[key] = chunk
    return [unique[k] for k in sorted(unique)]


def _dedupe_symbols(symbols: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    unique: dict[tuple[str, str, str], dict[str, Any]] = {}
    for symbol in symbols:
        key = (symbol["file"] or "", symbol["symbol"], symbol["repo"] or "")
        unique.setdefault(key, symbol)
    return [unique[k] for k in sorted(unique)]


def load_ground_truth(task_dirs: Sequence[Path], *, tasks_root: Path | None = None) -> GroundTruth:
    """Load a task's ground truth from all its task-definition folders.

    Parameters
    ----------
    task_dirs
        Every folder of the task (a task can be split across suites), primary first.
    tasks_root
        Root of the task definitions; ``task_dirs`` are reported relative to it.

    Returns
    -------
    GroundTruth
        Empty (no ``files``, ``source``/``confidence`` ``None``) when no source
        yields files; ``warnings`` says what was skipped on the way.

    Raises
    ------
    GroundTruthError
        When a task folder does not exist or cannot be listed.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> task = pathlib.Path(tempfile.mkdtemp()) / "t"
    >>> (task / "tests").mkdir(parents=True)
    >>> _ = (task / "tests" / "ground_truth.json").write_text('["./src/A.py", "src/a.py", "..."]')
    >>> gt = load_ground_truth([task])
    >>> gt.files, gt.source, gt.confidence
    (['src/a.py'], 'tests/ground_truth.json', 'high')
    """
    return _load(task_dirs, tasks_root)[0]


def _load(task_dirs: Sequence[Path], tasks_root: Path | None) -> tuple[GroundTruth, list[Path]]:
    """The ground truth, and the folders listed and files read to make it."""
    warnings: list[str] = []
    folders = [Path(d) for d in task_dirs]
    result = GroundTruth(task_dirs=[_relative_dir(d, tasks_root) for d in folders])
    if not folders:
        return result, []
    files = _TaskFiles(folders, warnings)

    winner: _Candidate | None = None
    later_chunks: list[dict[str, Any]] = []
    symbol_fallback: list[dict[str, Any]] = []
    edit_source: _Candidate | None = None
    for candidate in _candidates(files, warnings):
        # edit lists of high confidence, and the gold patch of solve.sh (a patch reference)
        if (
            edit_source is None
            and candidate.edit_files
            and (candidate.confidence == "high" or candidate.source == _SOLVE)
        ):
            edit_source = candidate
        if not symbol_fallback and candidate.symbols:
            symbol_fallback = candidate.symbols
        if winner is None:
            if candidate.files:
                winner = candidate
        elif not winner.chunks and not later_chunks and candidate.chunks:
            later_chunks = candidate.chunks

    if winner is not None:
        result.files = sorted(set(winner.files))
        result.source = winner.source
        result.confidence = winner.confidence
        result.origin = winner.origin
        result.symbols = _dedupe_symbols(winner.symbols or symbol_fallback)
        if winner.chunks:
            chunks = winner.chunks
        else:
            matcher = GroundTruthMatcher(result.files)
            chunks = [
                {**c, "file": matched}
                for c in later_chunks
                if (matched := matcher.match(c["file"])) is not None
            ]
        result.chunks = _dedupe_chunks(chunks) or None
    else:
        result.symbols = _dedupe_symbols(symbol_fallback)
    if edit_source is not None and edit_source.edit_files:
        result.expected_edit_files = sorted(set(edit_source.edit_files))
    result.warnings = warnings
    return result, [*files.listed, *dict.fromkeys(files.read_paths)]


# --------------------------------------------------------------------------- cache

#: Tasks whose ground truth one process keeps (least recently used dropped first).
CACHE_SIZE = 4096
#: A file changed less than this long ago may change again within the file system's
#: timestamp granularity unnoticed, so such a task is not cached ("racily clean" in git).
_RACY_NS = 2_000_000_000
_Fingerprint = tuple[tuple[int, int, int, int] | None, ...]
#: key -> (paths watched, their fingerprint, ground truth, the pass that last checked it)
_CACHE: OrderedDict[
    tuple[tuple[str, ...], str | None],
    tuple[list[Path], _Fingerprint, GroundTruth, Hashable | None],
]
_CACHE = OrderedDict()


def _fingerprint(paths: Sequence[Path]) -> _Fingerprint:
    stats: list[tuple[int, int, int, int] | None] = []
    for path in paths:
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            stats.append(None)
            continue
        stats.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(stats)


def _copy(gt: GroundTruth) -> GroundTruth:
    """A copy whose lists the caller may change without touching the cached one."""
    return replace(
        gt,
        files=list(gt.files),
        symbols=list(gt.symbols),
        expected_edit_files=None
        if gt.expected_edit_files is None
        else list(gt.expected_edit_files),
        chunks=None if gt.chunks is None else list(gt.chunks),
        task_dirs=list(gt.task_dirs),
        warnings=list(gt.warnings),
    )


def load_ground_truth_cached(
    task_dirs: Sequence[Path], *, tasks_root: Path | None = None, pass_id: Hashable | None = None
) -> GroundTruth:
    """:func:`load_ground_truth`, read once per task per process while the task is unchanged.

    The result is kept with a fingerprint (inode, size, modification and change times)
    of the folders listed (each task folder, its ``tests/`` and ``solution/``) and every
    file read; a later call re-reads the task only when it differs (a file added, removed,
    renamed or rewritten). A task changed within the last two seconds is not kept, so a
    change within the file system's timestamp granularity is never missed. Errors (a
    folder that cannot be listed) are raised every time, never cached.

    ``pass_id`` (any hashable, e.g. one per normalise pass): a task whose fingerprint was
    checked (or read) under the same id is not checked again, so its files are ``stat``-ed
    once per pass rather than once per trial; a task edited during a pass is seen by the
    next pass (another id, or ``None``: check every call).

    Examples
    --------
    >>> import os, tempfile, pathlib
    >>> task = pathlib.Path(tempfile.mkdtemp()) / "t"
    >>> (task / "tests").mkdir(parents=True)
    >>> gt_file = task / "tests" / "ground_truth.json"
    >>> _ = gt_file.write_text('["a.py"]')
    >>> for p in (gt_file, task / "tests", task):
    ...     os.utime(p, ns=(0, 0))  # long ago: cacheable
    >>> load_ground_truth_cached([task]).files
    ['a.py']
    >>> _ = gt_file.write_text('["b.py"]')
    >>> load_ground_truth_cached([task]).files
    ['b.py']
    """
    folders = [d if isinstance(d, Path) else Path(d) for d in task_dirs]
    key = (tuple(str(f) for f in folders), None if tasks_root is None else str(tasks_root))
    hit = _CACHE.get(key)
    if hit is not None:
        watched, fingerprint, cached, checked = hit
        if (pass_id is not None and checked == pass_id) or _fingerprint(watched) == fingerprint:
            _CACHE[key] = (watched, fingerprint, cached, pass_id)
            _CACHE.move_to_end(key)
            return _copy(cached)
        del _CACHE[key]
    before = _fingerprint(folders)
    gt, watched = _load(folders, tasks_root)
    fingerprint = _fingerprint(watched)
    newest = max((max(s[2], s[3]) for s in fingerprint if s is not None), default=0)
    unchanged = _fingerprint(folders) == before  # nothing renamed in or out while reading
    if unchanged and time.time_ns() - newest > _RACY_NS:
        _CACHE[key] = (watched, fingerprint, _copy(gt), pass_id)
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return gt
