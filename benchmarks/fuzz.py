"""Fuzz the CLI with hostile variants of the real trials (issue 18's acceptance benchmark).

Not a timed test: a seeded, deterministic generator of mutated trials and task folders made
from the real sample runs in ``../shared/corpus/csb`` (copied, never written), and a driver
that runs ``retrieval-lib normalize``, ``evaluate`` and ``study`` on them in subprocesses
(each with a timeout and a memory limit) and counts what must never happen:

* ``crash``: a traceback, an exit code other than the documented 0/1/2, or exit 1 without
  a message;
* ``internal_error``: a trial or run reported failed with a bare Python exception
  (``TypeError: ...``, ``OverflowError: ...``): the library's catch-all caught a bug;
* ``hang``: a command that did not finish within its timeout (killed with its process
  group);
* ``aborted``: a command that stopped as a whole (no per-trial report) because of one run;
  ``(group: n runs together)`` when only those runs together make it stop;
* ``schema_invalid``: a written document, metrics record or run summary that fails the
  shipped schema, or is not strict JSON (``NaN``/``Infinity``);
* ``input_changed``: any byte, mode, mtime or entry of the mutated input tree (runs and
  task definitions) that differs after the commands ran (every output goes to ``--out``);
* ``lost``: a mutated trial that ends up neither as a document (normalize), a metrics
  record (evaluate) or a row of the study's trials table (study), nor named in what the
  command printed or wrote as failed / left out.

Every mutated trial gets a unique folder name, so "named" is a plain text search of the
command's output and of the JSON reports it wrote. Trials are grouped in run folders by
mutation (so a run that fails as a whole is attributed to one mutation) and the runs in a
few groups, each group one command per stage (``--workers 2``); a group whose command
crashes, hangs or stops as a whole is re-run run by run, so one bad run is attributed to
its own mutation and the others still count. Mutations that can hang (FIFOs, links to
``/dev/zero``) or that affect a whole tree (a symlink loop beside the runs, hostile task
folders) get groups of their own with their own tasks root.

Usage::

    .venv/bin/python benchmarks/fuzz.py --trials 500           # a minute or two
    .venv/bin/python benchmarks/fuzz.py                        # 10,000 trials
    .venv/bin/python benchmarks/fuzz.py --trials 2000 --seed 7 --keep --work /tmp/fz

Findings (per failure class and mutation, each with a reproducer: mutation, seed, trial
index, the mutated file and the error) are printed and written to
``benchmarks/out/fuzz.json``. ``--keep`` keeps the mutated tree to replay a reproducer;
``--mutations a,b`` restricts the run to some mutations (same seed, same trials).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import json
import os
import random
import re
import resource
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
FAILURE_CLASSES = (
    "crash",
    "internal_error",
    "hang",
    "aborted",
    "schema_invalid",
    "input_changed",
    "lost",
)
_ID_ALPHABET = string.ascii_letters + string.digits
_PY_EXC = re.compile(
    r"\b(TypeError|ValueError|KeyError|IndexError|AttributeError|OverflowError|RecursionError|"
    r"ZeroDivisionError|UnicodeEncodeError|UnicodeDecodeError|UnicodeError|MemoryError|"
    r"AssertionError|NotImplementedError|RuntimeError|NameError|UnboundLocalError|OSError|"
    r"FileNotFoundError|IsADirectoryError|NotADirectoryError|PermissionError|"
    r"BlockingIOError|StopIteration|JSONDecodeError|TOMLDecodeError|ParseSyntaxException|"
    r"ArrowInvalid|ArrowTypeError|ArrowNotImplementedError|BrokenProcessPool)\b"
)


def default_corpus() -> Path:
    """``../shared/corpus/csb`` next to the project (a worktree looks further up)."""
    for folder in (PROJECT, *PROJECT.parents):
        candidate = folder.parent / "shared" / "corpus" / "csb"
        if candidate.is_dir():
            return candidate
    return PROJECT.parent / "shared" / "corpus" / "csb"


# --------------------------------------------------------------------------- base trials


@dataclass(frozen=True)
class BaseTrial:
    """One real trial of the corpus: where it sits and which files it has."""

    rel: str  # path relative to corpus/runs/official/<run>/
    run: str
    layout: str  # batch | archive
    level1: str  # config folder (batch) or group folder (archive)
    level2: str  # batch timestamp or job folder
    folder: str  # trial folder name
    task: str  # canonical task name
    suite: str  # benchmark suite folder of the task's task.toml
    files: tuple[str, ...]  # files relative to the trial folder


def find_base_trials(corpus: Path) -> list[BaseTrial]:
    found = []
    official = corpus / "runs" / "official"
    for result in sorted(official.rglob("result.json")):
        trial = result.parent
        rel = trial.relative_to(official)
        parts = rel.parts
        if len(parts) != 4 or "__" not in parts[3]:
            continue  # a job's own result.json
        data = json.loads(result.read_text())
        raw = data["task_name"]
        task = re.sub(r"^(mcp_|sgonly_)", "", raw)
        task = re.sub(r"_[A-Za-z0-9]{6}$", "", task).lower()
        suites = sorted(p.parent.name for p in (corpus / "benchmarks").glob(f"*/{task}/task.toml"))
        files = tuple(sorted(str(p.relative_to(trial)) for p in trial.rglob("*") if p.is_file()))
        layout = "batch" if re.match(r"^\d{4}-\d\d-\d\d__", parts[2]) else "archive"
        found.append(
            BaseTrial(
                str(rel),
                parts[0],
                layout,
                parts[1],
                parts[2],
                parts[3],
                task,
                suites[0] if suites else "",
                files,
            )
        )
    return found


# --------------------------------------------------------------------------- file helpers


def replace_bytes(path: Path, data: bytes) -> None:
    """Write a new file (unlinking first: unmutated files are hard links to one copy)."""
    remove(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


# --------------------------------------------------------------------------- JSON mutations

_INTERESTING_KEYS = {
    "task_name",
    "trial_name",
    "started_at",
    "finished_at",
    "agent_result",
    "n_input_tokens",
    "n_cache_tokens",
    "n_output_tokens",
    "cost_usd",
    "verifier_result",
    "rewards",
    "reward",
    "exception_info",
    "exception_type",
    "agent_info",
    "version",
    "model_info",
    "config",
    "agent",
    "model_name",
    "agent_execution",
    "steps",
    "step_id",
    "timestamp",
    "source",
    "tool_calls",
    "tool_call_id",
    "function_name",
    "arguments",
    "observation",
    "results",
    "source_call_id",
    "content",
    "metrics",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "extra",
    "cache_read_input_tokens",
    "final_metrics",
    "total_prompt_tokens",
    "total_completion_tokens",
    "total_cached_tokens",
    "total_steps",
    "schema_version",
    "file_path",
    "offset",
    "limit",
    "path",
    "repo",
    "startLine",
    "endLine",
    "pattern",
    "query",
    "command",
    "files",
    "symbols",
    "file",
    "symbol",
    "chunks",
    "line_start",
    "line_end",
    "expected_edit_files",
    "type",
    "message",
    "id",
    "usage",
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "tool_use_id",
    "is_error",
    "name",
    "input",
    "modelUsage",
    "total_cost_usd",
    "duration_ms",
    "num_turns",
    "parent_tool_use_id",
    "subtype",
    "tools",
    "model",
    "session_id",
    "ground_truth_confidence",
    "ground_truth_source",
}


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.extend(_paths(value, (*prefix, i)))
    return out


def _get(node: Any, path: tuple) -> Any:
    for part in path:
        node = node[part]
    return node


def _set(node: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _get(node, path[:-1])[path[-1]] = value
    return node


def _pick_path(rng: random.Random, doc: Any, want: Callable[[Any], bool] | None = None) -> tuple:
    paths = _paths(doc)
    if want is not None:
        typed = [p for p in paths if want(_get(doc, p))]
        paths = typed or paths
    interesting = [p for p in paths if p and isinstance(p[-1], str) and p[-1] in _INTERESTING_KEYS]
    if interesting and rng.random() < 0.6:
        return rng.choice(interesting)
    non_root = [p for p in paths if p] or paths
    return rng.choice(non_root)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_MARK = "\u0000FUZZ\u0000"


def _wrong_value(rng: random.Random, old: Any) -> Any:
    choices: list[Any] = [
        [],
        {},
        "",
        "x",
        0,
        -1,
        1.5,
        True,
        False,
        None,
        [[1, "a"]],
        {"a": {"b": []}},
        ["a", "b"],
        -(2**63) - 1,
        2**64,
        "2026-13-45T99:99:99Z",
        "../../../etc/passwd",
        "/dev/zero",
        "<img src=x onerror=alert(1)>",
    ]
    choices = [c for c in choices if type(c) is not type(old) or c != old]
    return rng.choice(choices)


def _raw_for(op: str, rng: random.Random, old: Any) -> str:
    """Raw JSON text of the replacement value (may be non-standard: NaN, 400 digits)."""
    if op == "huge_int":
        return ("-" if rng.random() < 0.2 else "") + "9" * rng.choice([20, 310, 400, 5000])
    if op == "huge_float":
        return rng.choice(["1e400", "-1e400", "1e308", "1e30", "4.9e-324", "1e-400"])
    if op == "nan":
        return rng.choice(["NaN", "Infinity", "-Infinity"])
    if op == "deep":
        depth = rng.choice([300, 1000, 3000, 100000])
        inner = json.dumps(old)
        if rng.random() < 0.5:
            return "[" * depth + inner + "]" * depth
        return '{"a":' * depth + inner + "}" * depth
    if op == "wrong_type":
        return json.dumps(_wrong_value(rng, old))
    if op == "surrogate":
        return rng.choice(['"\\ud800"', '"a\\udfffb"', '"\\u0000nul"', '"\\ud83d"'])
    if op == "long_string":
        return json.dumps("A" * rng.choice([100_000, 2_000_000]))
    raise ValueError(op)


def mutate_json_text(rng: random.Random, text: str, op: str) -> tuple[str, str]:
    """Apply one JSON-aware mutation; return (new text, what was done)."""
    doc = json.loads(text)
    if op == "top_type":
        raw = rng.choice(["[]", '"text"', "null", "42", "true", "[{}]"])
        return raw, f"top-level {raw}"
    if op == "remove_key":
        candidates = [p for p in _paths(doc) if p and isinstance(p[-1], str)]
        if not candidates:
            return "{}", "empty object"
        interesting = [p for p in candidates if p[-1] in _INTERESTING_KEYS]
        path = rng.choice(interesting if interesting and rng.random() < 0.7 else candidates)
        del _get(doc, path[:-1])[path[-1]]
        return json.dumps(doc, ensure_ascii=False), f"removed {_show(path)}"
    if op == "duplicate_key":
        objects = [p for p in _paths(doc) if isinstance(_get(doc, p), dict) and _get(doc, p)]
        path = rng.choice(objects) if objects else ()
        node = _get(doc, path) if objects else {}
        key = rng.choice(sorted(node)) if node else "task_name"
        marker = {_MARK: 1}
        _set(doc, path, {**marker, **node}) if path else None
        out = json.dumps(doc, ensure_ascii=False)
        dup = f"{json.dumps(key)}: {json.dumps(_wrong_value(rng, node.get(key)))}"
        if path:
            out = out.replace(f"{json.dumps(_MARK)}: 1", dup, 1)
        else:
            out = "{" + dup + ", " + out[1:] if out.startswith("{") and len(out) > 2 else out
        return out, f"duplicate key {key!r} at {_show(path)}"
    want = _is_number if op in ("huge_int", "huge_float", "nan") else None
    if op == "surrogate":
        want = lambda v: isinstance(v, str)  # noqa: E731
    path = _pick_path(rng, doc, want)
    old = _get(doc, path)
    raw = _raw_for(op, rng, old)
    doc = _set(doc, path, _MARK)
    out = json.dumps(doc, ensure_ascii=False).replace(json.dumps(_MARK), raw, 1)
    shown = raw if len(raw) < 60 else raw[:30] + f"...({len(raw)} chars)"
    return out, f"{_show(path)} = {shown}"


def _show(path: tuple) -> str:
    return "/" + "/".join(map(str, path))


JSON_OPS = (
    "huge_int",
    "huge_float",
    "nan",
    "deep",
    "wrong_type",
    "surrogate",
    "long_string",
    "top_type",
    "remove_key",
    "duplicate_key",
)


# --------------------------------------------------------------------------- byte mutations


def byte_mutation(rng: random.Random, data: bytes, op: str) -> tuple[bytes, str]:
    n = len(data)
    if op == "truncate":
        cut = rng.randrange(1, max(2, n))
        return data[:cut], f"cut at byte {cut} of {n}"
    if op == "empty":
        return b"", "empty"
    if op == "byte_flip":
        buf = bytearray(data)
        where = sorted(rng.randrange(max(1, n)) for _ in range(rng.randint(1, 8)))
        for i in where:
            if i < n:
                buf[i] ^= 1 << rng.randrange(8)
        return bytes(buf), f"bits flipped at {where}"
    if op == "bad_utf8":
        buf = bytearray(data)
        where = sorted(rng.randrange(max(1, n)) for _ in range(rng.randint(1, 4)))
        seq = rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\x80", b"\xf5\x80"])
        # inside a string where possible: after a quote
        for i in reversed(where):
            j = data.find(b'"', i)
            j = j + 1 if j >= 0 else i
            buf[j:j] = seq
        return bytes(buf), f"{seq!r} inserted near {where}"
    if op == "nul":
        i = rng.randrange(max(1, n))
        return data[:i] + b"\x00" * rng.randint(1, 64) + data[i:], f"NUL bytes at {i}"
    if op == "bom_utf16":
        if rng.random() < 0.5:
            return b"\xef\xbb\xbf" + data, "UTF-8 BOM"
        return data.decode("utf-8", "replace").encode("utf-16"), "re-encoded UTF-16"
    raise ValueError(op)


BYTE_OPS = ("truncate", "empty", "byte_flip", "bad_utf8", "nul", "bom_utf16")


# --------------------------------------------------------------------------- file-system ops


def fs_mutation(rng: random.Random, path: Path, op: str, outside: Path) -> str:
    remove(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if op == "dir_for_file":
        path.mkdir()
        (path / "inner.json").write_text("{}")
        return "a folder"
    if op == "link_passwd":
        path.symlink_to("/etc/passwd")
        return "symlink to /etc/passwd"
    if op == "link_devzero":
        path.symlink_to("/dev/zero")
        return "symlink to /dev/zero"
    if op == "link_loop":
        path.symlink_to(path.name)
        return "symlink to itself"
    if op == "link_dangling":
        path.symlink_to("does-not-exist.json")
        return "dangling symlink"
    if op == "link_outside":
        path.symlink_to(outside / "secret.json")
        return f"symlink to {outside / 'secret.json'} (outside the run)"
    if op == "fifo":
        os.mkfifo(path)
        return "FIFO"
    if op == "missing":
        return "deleted"
    raise ValueError(op)


FS_OPS = ("dir_for_file", "link_passwd", "link_loop", "link_dangling", "link_outside", "missing")
HAZARD_FS_OPS = ("fifo", "link_devzero")


# --------------------------------------------------------------------------- stream-json


def stream_mutation(rng: random.Random, data: bytes, op: str) -> tuple[bytes, str]:
    lines = data.split(b"\n")
    idx = [i for i, line in enumerate(lines) if line.strip()]
    if op.startswith("line_json_"):
        json_op = op[len("line_json_") :]
        i = rng.choice(idx[1:] or idx)
        text, what = mutate_json_text(rng, lines[i].decode("utf-8"), json_op)
        lines[i] = text.replace("\n", "\\n").encode("utf-8", "surrogatepass")
        return b"\n".join(lines), f"line {i + 1}: {what}"
    if op == "line_drop":
        drop = set(rng.sample(idx, k=min(len(idx), rng.randint(1, 5))))
        return b"\n".join(
            x for i, x in enumerate(lines) if i not in drop
        ), f"dropped {sorted(drop)}"
    if op == "line_shuffle":
        body = lines[1:]
        rng.shuffle(body)
        return b"\n".join([lines[0], *body]), "lines after init shuffled"
    if op == "line_garbage":
        i = rng.choice(idx)
        junk = rng.choice(
            [
                b"not json",
                b"[1,2,3]",
                b"42",
                b'"str"',
                b"null",
                b"{",
                b'{"type":null}',
                b'{"type":"assistant"}',
                b'{"type":"user","message":[]}',
                b'{"type":"result","modelUsage":[1]}',
                b"\x1b[0m$ claude --print",
                b"\r",
            ]
        )
        lines.insert(i, junk)
        return b"\n".join(lines), f"line {i + 1} inserted: {junk!r}"
    if op == "line_cut_last":
        last = idx[-1]
        cut = rng.randrange(1, max(2, len(lines[last])))
        lines[last] = lines[last][:cut]
        return b"\n".join(lines[: last + 1]), f"last line cut at {cut}"
    if op == "line_join":
        i = rng.choice(idx[:-1] or idx)
        if i + 1 < len(lines):
            lines[i : i + 2] = [lines[i] + lines[i + 1]]
        return b"\n".join(lines), f"lines {i + 1} and {i + 2} joined"
    if op == "crlf":
        return data.replace(b"\n", b"\r\n"), "CRLF line ends"
    if op == "duplicate_lines":
        i = rng.choice(idx)
        lines[i:i] = [lines[i]] * rng.choice([2, 50])
        return b"\n".join(lines), f"line {i + 1} repeated"
    raise ValueError(op)


STREAM_OPS = (
    *(f"line_json_{op}" for op in JSON_OPS if op not in ("top_type", "long_string")),
    "line_drop",
    "line_shuffle",
    "line_garbage",
    "line_cut_last",
    "line_join",
    "crlf",
    "duplicate_lines",
)


# --------------------------------------------------------------------------- catalogue


@dataclass
class Mutation:
    """A named way to damage a trial or a task folder."""

    name: str
    kind: str  # trial | sibling | task
    group: str  # bulk | hazard-<x> | tasks | task-hazard-<x> | rootloop
    apply: Callable[..., str]
    target: str = ""  # the file it touches (for the reproducer)
    applies: Callable[[BaseTrial], bool] = lambda b: True


TRIAL_FILES = {
    "result": "result.json",
    "trajectory": "agent/trajectory.json",
    "transcript": "agent/claude-code.txt",
    "task_metrics": "task_metrics.json",
}


def _has(rel: str) -> Callable[[BaseTrial], bool]:
    return lambda b: rel in b.files


def build_catalogue() -> list[Mutation]:
    cat: list[Mutation] = []

    def file_op(rel: str, fn: Callable[[random.Random, bytes], tuple[bytes, str]]):
        def apply(rng: random.Random, trial: Path, ctx: dict) -> str:
            path = trial / rel
            new, what = fn(rng, path.read_bytes())
            replace_bytes(path, new)
            return what

        return apply

    def fs_op(rel: str, op: str):
        def apply(rng: random.Random, trial: Path, ctx: dict) -> str:
            return fs_mutation(rng, trial / rel, op, ctx["outside"])

        return apply

    for short, rel in TRIAL_FILES.items():
        has = _has(rel)
        for op in BYTE_OPS:
            cat.append(
                Mutation(
                    f"{short}.{op}",
                    "trial",
                    "bulk",
                    file_op(rel, lambda r, d, op=op: byte_mutation(r, d, op)),
                    rel,
                    has,
                )
            )
        if rel.endswith(".json"):
            for op in JSON_OPS:
                cat.append(
                    Mutation(
                        f"{short}.json_{op}",
                        "trial",
                        "bulk",
                        file_op(
                            rel, lambda r, d, op=op: tuple_enc(mutate_json_text(r, d.decode(), op))
                        ),
                        rel,
                        has,
                    )
                )
        else:
            for op in STREAM_OPS:
                cat.append(
                    Mutation(
                        f"{short}.{op}",
                        "trial",
                        "bulk",
                        file_op(rel, lambda r, d, op=op: stream_mutation(r, d, op)),
                        rel,
                        has,
                    )
                )
        for op in FS_OPS:
            cat.append(Mutation(f"{short}.{op}", "trial", "bulk", fs_op(rel, op), rel, has))
        for op in HAZARD_FS_OPS:
            cat.append(Mutation(f"{short}.{op}", "trial", f"hazard-{op}", fs_op(rel, op), rel, has))

    # the trial folder's structure
    def agent_as_file(rng, trial, ctx):
        remove(trial / "agent")
        (trial / "agent").write_text("not a folder")
        return "agent/ is a file"

    def agent_link(target: str):
        def apply(rng, trial, ctx):
            remove(trial / "agent")
            (trial / "agent").symlink_to(target if target != "outside" else ctx["outside"])
            return f"agent/ -> {target}"

        return apply

    def loop_entry(rng, trial, ctx):
        (trial / "loop").symlink_to("loop")
        (trial / "agent" / "loop").symlink_to("../agent/loop")
        return "self-referencing links trial/loop and agent/loop"

    def no_trace(rng, trial, ctx):
        for rel in ("agent/trajectory.json", "agent/claude-code.txt"):
            remove(trial / rel)
        return "both traces removed"

    def stdout_banner(rng, trial, ctx):
        src = trial / "agent" / "claude-code.txt"
        data = src.read_bytes() if src.exists() else b""
        remove(src)
        banner = rng.choice(
            [b"$ bash -lc claude\n", b"\x1b[1mbanner\x1b[0m\r\n", b"\xff\xfe garbage\n"]
        )
        replace_bytes(
            trial / "agent" / "command-1" / "stdout.txt", banner * rng.randint(1, 3) + data
        )
        return f"transcript moved to agent/command-1/stdout.txt after {banner!r}"

    def dir_entries_in_agent(rng, trial, ctx):
        os.mkfifo(trial / "agent" / "stray.fifo")
        (trial / "agent" / "zero").symlink_to("/dev/zero")
        return "a FIFO and a /dev/zero link beside the traces"

    cat += [
        Mutation("trial.agent_is_file", "trial", "bulk", agent_as_file, "agent"),
        Mutation("trial.agent_link_loop", "trial", "bulk", agent_link("agent"), "agent"),
        Mutation("trial.agent_link_outside", "trial", "bulk", agent_link("outside"), "agent"),
        Mutation("trial.agent_link_etc", "trial", "bulk", agent_link("/etc"), "agent"),
        Mutation("trial.loop_entries", "trial", "bulk", loop_entry, "loop"),
        Mutation("trial.no_trace", "trial", "bulk", no_trace, "agent/*"),
        Mutation(
            "trial.stdout_banner",
            "trial",
            "bulk",
            stdout_banner,
            "agent/command-1/stdout.txt",
            _has("agent/claude-code.txt"),
        ),
        Mutation("trial.special_entries", "trial", "hazard-fifo", dir_entries_in_agent, "agent/"),
    ]

    # damage beside the trial: its siblings share the run (grouped per mutation anyway)
    def sibling_loop(level: int):
        def apply(rng, trial, ctx):
            folder = trial.parents[level]
            link = folder / "zz-loop"
            if not os.path.lexists(link):
                link.symlink_to("zz-loop")
            return f"{folder.name}/zz-loop -> zz-loop beside the trials' folders"

        return apply

    cat += [
        Mutation("sibling.batch_link_loop", "sibling", "siblings", sibling_loop(0), "zz-loop"),
        Mutation("sibling.config_link_loop", "sibling", "siblings", sibling_loop(1), "zz-loop"),
        Mutation("sibling.run_link_loop", "sibling", "siblings", sibling_loop(2), "zz-loop"),
        Mutation(
            "root.runs_link_loop",
            "sibling",
            "rootloop",
            lambda r, t, c: "runs/zz-loop -> zz-loop",
            "zz-loop",
        ),
    ]
    for name, config in (
        ("config.backslash", "baseline\\local-direct"),
        ("config.non_utf8", b"mcp-\xff\xfe-remote".decode("utf-8", "surrogateescape")),
        ("config.newline", "mcp-remote\ndirect"),
        ("config.markup", "<img src=x onerror=alert(1)>$^^$"),
        ("config.long", "c" * 240),
    ):
        cat.append(Mutation(name, "config", "siblings", lambda r, t, c: "", "<config folder>"))
        cat[-1].config_name = config  # type: ignore[attr-defined]

    # task folders: a copy of the trial's task under a new name, one file damaged
    task_files = {
        "toml": "task.toml",
        "gt": "tests/ground_truth.json",
        "test_sh": "tests/test.sh",
        "meta": "tests/ground_truth_meta.json",
    }

    def task_file_op(rel: str, fn):
        def apply(rng, task_dirs: list[Path], ctx):
            for d in task_dirs:
                if (d / rel).is_file():
                    new, what = fn(rng, (d / rel).read_bytes())
                    replace_bytes(d / rel, new)
                    return f"{d.parent.name}/{d.name}/{rel}: {what}"
            d = task_dirs[0]
            new, what = fn(rng, _task_file_default(rel))
            replace_bytes(d / rel, new)
            return f"{d.parent.name}/{d.name}/{rel} (added): {what}"

        return apply

    def task_fs_op(rel: str, op: str):
        def apply(rng, task_dirs: list[Path], ctx):
            d = next((d for d in task_dirs if os.path.lexists(d / rel)), task_dirs[0])
            return f"{d.name}/{rel}: " + fs_mutation(rng, d / rel, op, ctx["outside"])

        return apply

    for short, rel in task_files.items():
        for op in ("truncate", "empty", "byte_flip", "bad_utf8", "nul"):
            cat.append(
                Mutation(
                    f"task.{short}.{op}",
                    "task",
                    "tasks",
                    task_file_op(rel, lambda r, d, op=op: byte_mutation(r, d, op)),
                    rel,
                )
            )
        if rel.endswith(".json"):
            for op in JSON_OPS:
                cat.append(
                    Mutation(
                        f"task.{short}.json_{op}",
                        "task",
                        "tasks",
                        task_file_op(
                            rel, lambda r, d, op=op: tuple_enc(mutate_json_text(r, d.decode(), op))
                        ),
                        rel,
                    )
                )
        for op in ("dir_for_file", "link_passwd", "link_loop", "link_outside"):
            cat.append(Mutation(f"task.{short}.{op}", "task", "tasks", task_fs_op(rel, op), rel))
    for op in HAZARD_FS_OPS:
        cat.append(
            Mutation(
                f"task.gt.{op}",
                "task",
                f"task-hazard-{op}",
                task_fs_op("tests/ground_truth.json", op),
                "tests/ground_truth.json",
            )
        )
        cat.append(
            Mutation(
                f"task.toml.{op}",
                "task",
                f"task-hazard-{op}",
                task_fs_op("task.toml", op),
                "task.toml",
            )
        )

    def toml_values(rng, data: bytes) -> tuple[bytes, str]:
        text = data.decode("utf-8", "replace")
        choice = rng.choice(
            [
                ('name = "', 'name = 5\nxname = "'),
                ("time_limit_sec = ", "time_limit_sec = " + "9" * 400 + "\n#"),
                ('id = "', 'id = ["a", 1]\nxid = "'),
                ("[task]", "[task]\nrepo = { a = 1 }"),
                ("[metadata]", "[metadata]\n[metadata]"),
                ('version = "', 'version = nan\nxversion = "'),
            ]
        )
        if choice[0] in text:
            return text.replace(
                choice[0], choice[1], 1
            ).encode(), f"{choice[0]!r} -> {choice[1][:40]!r}"
        return (text + "\n" + choice[1] + '"\n').encode(), f"appended {choice[1][:40]!r}"

    def added(rel: str, make):
        def apply(rng, task_dirs, ctx):
            d = task_dirs[-1]
            data, what = make(rng)
            replace_bytes(d / rel, data)
            return f"{d.name}/{rel} added: {what}"

        return apply

    def defects(rng):
        big = rng.choice(["1e30", "9" * 5000, "-5", "NaN", '"12"', "[1]", "1.5", "null", "9" * 25])
        return (
            f'[{{"file": "django/contrib/admin/options.py", "line_start": {big}, "line_end": '
            f'{rng.choice([big, "10"])}, "defect_type": "x"}}]'
        ).encode(), f"line_start {big[:20]}"

    def agent_chunks(rng):
        big = rng.choice(["1e30", "9" * 5000, "-1", "Infinity", "[]", '"x"', str(2**63)])
        doc = (
            f'{{"files": ["django/contrib/admin/options.py"], "chunks": [{{"file": '
            f'"django/contrib/admin/options.py", "line_start": {big}, "line_end": 3, '
            f'"annotation": null}}]}}'
        )
        return doc.encode(), f"chunk line_start {big[:20]}"

    def patch(rng):
        digits = rng.choice(["9" * 5000, "9" * 30, "-3", "0", "x"])
        text = (
            f"--- a/django/contrib/admin/options.py\n+++ b/django/contrib/admin/options.py\n"
            f"@@ -{digits},7 +{digits},8 @@\n context\n-old\n+new\n"
        )
        if rng.random() < 0.3:
            text = text.encode() + b"\xff\xfe" + b"@@" * 100000
            return text, "hunk header and binary junk"
        return text.encode(), f"hunk header -{digits[:20]}"

    def solve(rng):
        body = (
            rng.choice([b"cat <<'EOF' | git apply\n", b"git apply <<EOF\n"])
            + patch(rng)[0]
            + b"EOF\n"
        )
        return body, "solve.sh with a damaged diff"

    def gt_symbols(rng):
        sym = rng.choice(
            [
                '[{"file": 1, "symbol": [], "repo": {}}]',
                '["x"]',
                "[null]",
                '{"a": 1}',
                '[{"file": "a.py"}]',
            ]
        )
        files = rng.choice(
            ['[1, null, {}, ["a"]]', '"a.py"', '["a.py", "a.py", "", "::", "/etc/passwd"]']
        )
        return (
            f'{{"files": {files}, "symbols": {sym}, "expected_edit_files": 7}}'.encode(),
            "wrong-typed fields",
        )

    def tests_as_file(rng, task_dirs, ctx):
        d = task_dirs[-1]
        remove(d / "tests")
        (d / "tests").write_text("not a folder")
        return f"{d.name}/tests is a file"

    def tests_link(target):
        def apply(rng, task_dirs, ctx):
            d = task_dirs[-1]
            remove(d / "tests")
            (d / "tests").symlink_to(target if target != "outside" else ctx["outside"])
            return f"{d.name}/tests -> {target}"

        return apply

    def loop_in_tests(rng, task_dirs, ctx):
        d = task_dirs[-1]
        (d / "tests").mkdir(exist_ok=True)
        (d / "tests" / "loop").symlink_to("loop")
        (d / "tests" / "sub").mkdir(exist_ok=True)
        (d / "tests" / "sub" / "up").symlink_to("..")
        return f"{d.name}/tests/loop -> loop and tests/sub/up -> .."

    def task_link_loop(rng, task_dirs, ctx):
        d = task_dirs[0]
        remove(d)
        d.symlink_to(d.name)
        return f"{d.parent.name}/{d.name} -> itself"

    cat += [
        Mutation(
            "task.toml.values", "task", "tasks", task_file_op("task.toml", toml_values), "task.toml"
        ),
        Mutation(
            "task.defects.numbers",
            "task",
            "tasks",
            added("tests/expected_defects.json", defects),
            "tests/expected_defects.json",
        ),
        Mutation(
            "task.gt_agent.chunks",
            "task",
            "tasks",
            added("tests/ground_truth_agent.json", agent_chunks),
            "tests/ground_truth_agent.json",
        ),
        Mutation(
            "task.patch.hunk",
            "task",
            "tasks",
            added("tests/reference_fix.patch", patch),
            "tests/reference_fix.patch",
        ),
        Mutation(
            "task.solve.diff",
            "task",
            "tasks",
            added("solution/solve.sh", solve),
            "solution/solve.sh",
        ),
        Mutation(
            "task.gt.types",
            "task",
            "tasks",
            added("tests/ground_truth.json", gt_symbols),
            "tests/ground_truth.json",
        ),
        Mutation("task.tests_is_file", "task", "tasks", tests_as_file, "tests"),
        Mutation("task.tests_link_loop", "task", "tasks", tests_link("tests"), "tests"),
        Mutation("task.tests_link_etc", "task", "tasks", tests_link("/etc"), "tests"),
        Mutation("task.loop_in_tests", "task", "tasks", loop_in_tests, "tests/loop"),
        Mutation("task.dir_link_loop", "task", "tasks", task_link_loop, "<task folder>"),
    ]
    return cat


def tuple_enc(pair: tuple[str, str]) -> tuple[bytes, str]:
    text, what = pair
    return text.encode("utf-8", "surrogatepass"), what


def _task_file_default(rel: str) -> bytes:
    if rel.endswith(".json"):
        return b'{"files": ["django/contrib/admin/options.py"], "ground_truth_confidence": "high"}'
    if rel.endswith(".toml"):
        return b'[metadata]\nname = "x"\n'
    return b"#!/bin/sh\ncat /workspace/django/contrib/admin/options.py\n"


# --------------------------------------------------------------------------- generation


@dataclass
class TrialRecord:
    index: int
    mutation: str
    group: str
    seed: int
    base: str
    run_id: str
    folder: str  # unique trial folder name
    trial_path: str  # relative to the group's runs root
    file: str
    detail: str = ""
    task: str = ""  # the (renamed) task for task mutations


def _trial_id(rng: random.Random, taken: set[str]) -> str:
    while True:
        ident = "".join(rng.choice(_ID_ALPHABET) for _ in range(7))
        if ident not in taken:
            taken.add(ident)
            return ident


def generate(
    corpus: Path, work: Path, n_trials: int, seed: int, only: set[str] | None, per_run: int
) -> tuple[list[TrialRecord], dict[str, dict[str, Path]]]:
    """Write the mutated trees under ``work/input/<group>/{runs,benchmarks}``.

    Returns the trial records and, per group, its runs root and tasks root.
    """
    bases = find_base_trials(corpus)
    pristine = work / "pristine"
    shutil.copytree(corpus / "runs", pristine / "runs", symlinks=True)
    shutil.copytree(corpus / "benchmarks", pristine / "benchmarks", symlinks=True)
    outside = work / "outside"
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.json").write_text('{"secret": "outside the run"}\n')
    catalogue = build_catalogue()
    if only:
        unknown = only - {m.name for m in catalogue}
        if unknown:
            raise SystemExit(f"unknown mutations: {', '.join(sorted(unknown))}")
    rng = random.Random(seed)
    ids: set[str] = set()
    records: list[TrialRecord] = []
    groups: dict[str, dict[str, Path]] = {}
    run_fill: dict[tuple[str, str], tuple[str, int]] = {}
    run_count: collections.Counter[str] = collections.Counter()
    task_counter = 0
    order = list(range(len(catalogue)))
    index = 0
    while index < n_trials:
        rng.shuffle(order)
        for ci in order:
            if index >= n_trials:
                break
            mutation = catalogue[ci]
            trial_seed = rng.randrange(2**32)
            if only and mutation.name not in only:
                continue
            candidates = [b for b in bases if mutation.applies(b)]
            if mutation.kind == "task":
                candidates = [b for b in candidates if b.suite]
            if not candidates:
                continue
            base = candidates[trial_seed % len(candidates)]
            mrng = random.Random(trial_seed)
            group = mutation.group
            root = work / "input" / group
            if group not in groups:
                groups[group] = {"runs": root / "runs", "tasks": root / "benchmarks"}
                _link_tree(pristine / "benchmarks", root / "benchmarks")
                (root / "runs").mkdir(parents=True)
            # run folder: per mutation, at most per_run trials
            key = (group, mutation.name)
            run_id, filled = run_fill.get(key, ("", per_run))
            if filled >= per_run:
                run_count[mutation.name] += 1
                run_id = f"fz_{_slug(mutation.name)}_{run_count[mutation.name]:03d}"
                filled = 0
            run_fill[key] = (run_id, filled + 1)
            level1 = getattr(mutation, "config_name", base.level1)
            ident = _trial_id(mrng, ids)
            task_name = base.task
            if mutation.kind == "task":
                task_counter += 1
                task_name = f"fz{task_counter:05d}-{base.task}"
            prefix = base.folder.rsplit("__", 1)[0]
            if mutation.kind == "task":
                prefix = ("mcp_" if base.folder.startswith("mcp_") else "") + task_name[:28]
            folder = f"{prefix}__{ident}"
            trial_dir = root / "runs" / run_id / level1 / base.level2 / folder
            _link_tree(pristine / "runs" / "official" / base.rel, trial_dir)
            record = TrialRecord(
                index,
                mutation.name,
                group,
                trial_seed,
                base.rel,
                run_id,
                folder,
                str(trial_dir.relative_to(root / "runs")),
                mutation.target,
                task=task_name,
            )
            ctx = {"outside": outside}
            if mutation.kind == "task":
                _rename_task(trial_dir, base, task_name)
                task_dirs = _copy_task(
                    pristine / "benchmarks", root / "benchmarks", base.task, task_name
                )
                record.detail = mutation.apply(mrng, task_dirs, ctx)
            else:
                _set_trial_name(trial_dir, folder)
                record.detail = mutation.apply(mrng, trial_dir, ctx)
                if mutation.kind == "config":
                    record.detail = f"config folder named {level1!r}"
            records.append(record)
            index += 1
    if "rootloop" in groups:
        (groups["rootloop"]["runs"] / "zz-loop").symlink_to("zz-loop")
    return records, groups


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")


def _link_tree(src: Path, dst: Path) -> None:
    """Copy a tree as hard links to ``pristine`` (mutations replace files, never edit)."""
    shutil.copytree(src, dst, symlinks=True, copy_function=os.link)


def _set_trial_name(trial_dir: Path, folder: str) -> None:
    """Give result.json the trial's (unique) name, as the harness would."""
    path = trial_dir / "result.json"
    data = json.loads(path.read_text())
    data["trial_name"] = folder
    data["config"]["trial_name"] = folder
    replace_bytes(path, json.dumps(data).encode())


def _rename_task(trial_dir: Path, base: BaseTrial, task_name: str) -> None:
    path = trial_dir / "result.json"
    data = json.loads(path.read_text())
    raw = data["task_name"]
    data["task_name"] = raw.replace(base.task, task_name) if base.task in raw.lower() else task_name
    data["trial_name"] = data["config"]["trial_name"] = trial_dir.name
    replace_bytes(path, json.dumps(data).encode())


def _copy_task(pristine: Path, tasks_root: Path, task: str, new: str) -> list[Path]:
    made = []
    for src in sorted(pristine.glob(f"*/{task}")):
        dst = tasks_root / src.parent.name / new
        _link_tree(src, dst)
        made.append(dst)
    # the folder with task.toml first
    made.sort(key=lambda d: not (d / "task.toml").exists())
    return made


# --------------------------------------------------------------------------- snapshots


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry below ``root`` (links not followed): type, mode, size, mtime, content."""
    state: dict[str, tuple] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                state[rel] = ("link", os.readlink(path), st.st_mtime_ns)
            elif os.path.isdir(path) and not os.path.islink(path):
                state[rel] = ("dir", st.st_mode, st.st_mtime_ns)
            elif st.st_mode & 0o170000 == 0o100000:
                with open(path, "rb") as handle:
                    digest = hashlib.sha1(handle.read()).hexdigest()
                state[rel] = ("file", st.st_mode, st.st_size, st.st_mtime_ns, digest)
            else:
                state[rel] = ("special", st.st_mode, st.st_mtime_ns)
    st = os.lstat(root)
    state["."] = ("dir", st.st_mode, st.st_mtime_ns)
    return state


# --------------------------------------------------------------------------- commands


@dataclass
class CommandResult:
    stage: str
    argv: list[str]
    returncode: int | None
    seconds: float
    stdout: str
    stderr: str
    timed_out: bool = False
    problem: str | None = None  # crash | hang | whole-failure reason

    @property
    def text(self) -> str:
        return self.stdout + "\n" + self.stderr


def _limits(memory_gb: float) -> Callable[[], None]:
    def apply() -> None:
        limit = int(memory_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def run_cli(
    stage: str, args: list[str], timeout: float, memory_gb: float, env: dict
) -> CommandResult:
    argv = [sys.executable, "-m", "retrieval_lib", *args]
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_limits(memory_gb),
        env=env,
        cwd=env["FUZZ_CWD"],
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the command and every process it started
        out, err = proc.communicate()
    seconds = time.perf_counter() - start
    result = CommandResult(
        stage,
        argv[3:],
        proc.returncode,
        seconds,
        out.decode("utf-8", "backslashreplace"),
        err.decode("utf-8", "backslashreplace"),
        timed_out,
    )
    result.problem = classify_command(result)
    return result


def classify_command(result: CommandResult) -> str | None:
    if result.timed_out:
        return "hang"
    if "Traceback (most recent call last)" in result.text:
        return "crash"
    if result.returncode not in (0, 1, 2):
        return "crash"
    if result.returncode == 1:
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        if not lines:
            return "crash"
    return None


def last_error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        if _PY_EXC.search(line) or "error" in line.lower():
            return line[:300]
    return (lines[-1] if lines else "")[:300]


# --------------------------------------------------------------------------- driver


@dataclass
class Findings:
    counts: dict[str, collections.Counter] = field(
        default_factory=lambda: {c: collections.Counter() for c in FAILURE_CLASSES}
    )
    examples: dict[str, dict[str, dict]] = field(
        default_factory=lambda: {c: {} for c in FAILURE_CLASSES}
    )

    by_stage: dict[str, collections.Counter] = field(
        default_factory=lambda: {c: collections.Counter() for c in FAILURE_CLASSES}
    )

    def add(self, cls: str, mutation: str, example: dict, n: int = 1) -> None:
        self.counts[cls][mutation] += n
        self.by_stage[cls][example.get("stage", "?")] += n
        self.examples[cls].setdefault(mutation, example)


class Fuzz:
    def __init__(
        self,
        args: argparse.Namespace,
        work: Path,
        records: list[TrialRecord],
        groups: dict[str, dict[str, Path]],
    ):
        self.args = args
        self.work = work
        self.records = records
        self.groups = groups
        self.findings = Findings()
        self.commands: list[CommandResult] = []
        #: commands that failed as a whole while each part of them succeeded
        self.unpinned: list[tuple[CommandResult, list[str], str]] = []
        #: commands (by id) that did not end normally: no per-trial report
        self.not_ok: set[int] = set()
        #: where each mutated trial ended up (normalize), for the summary
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.env = dict(
            os.environ,
            SOURCE_DATE_EPOCH="1767225600",
            MPLBACKEND="Agg",
            FUZZ_CWD=str(work / "cwd"),
            PYTHONDONTWRITEBYTECODE="1",
        )
        (work / "cwd").mkdir(exist_ok=True)
        self.by_run: dict[tuple[str, str], list[TrialRecord]] = collections.defaultdict(list)
        for r in records:
            self.by_run[(r.group, r.run_id)].append(r)

    # -- helpers
    def example(self, rec: TrialRecord | None, stage: str, error: str, **extra: Any) -> dict:
        ex: dict[str, Any] = {"stage": stage, "error": error[:500], "seed": self.args.seed}
        if rec is not None:
            ex.update(
                mutation=rec.mutation,
                trial_index=rec.index,
                trial_seed=rec.seed,
                base_trial=rec.base,
                file=rec.file,
                detail=rec.detail[:300],
                trial=f"input/{rec.group}/runs/{rec.trial_path}",
            )
        ex.update(extra)
        return ex

    def timeout(self, stage: str, group: str, n: int) -> float:
        """Generous for the work expected (``--seconds-per-trial``), short for hazards."""
        base = {"normalize": 30.0, "evaluate": 60.0, "study": 120.0}[stage]
        if group != "bulk" and group != "tasks":
            base /= 2
        per_trial = self.args.seconds_per_trial * (3 if stage == "study" else 1)
        return (base + n * per_trial) * self.args.timeout_factor

    def run_stage(
        self,
        stage: str,
        group: str,
        args_for: Callable[[list[str] | None], list[str]],
        runs: list[str],
        ok: Callable[[CommandResult, list[str]], bool],
        suspect: set[str] = frozenset(),
    ) -> list[tuple[CommandResult, list[str]]]:
        """The group's runs in one command (``args_for(None)``); the ``suspect`` runs, which
        failed an earlier stage as a whole, one by one. A command that fails as a whole
        (crash, hang, or no normal end: ``ok``) is split into about sqrt(n) parts, and a
        failing part into single runs, so each whole failure is pinned to its run."""
        done: list[tuple[CommandResult, list[str]]] = []
        healthy = [r for r in runs if r not in suspect]

        def attempt(sel: list[str], whole: bool) -> bool:
            """Run ``sel``; True when a failure was recorded (here or in a part)."""
            n = sum(len(self.by_run[(group, r)]) for r in sel)
            res = run_cli(
                stage,
                args_for(None if whole else sel),
                self.timeout(stage, group, n),
                self.args.memory_gb,
                self.env,
            )
            self.commands.append(res)
            good = res.problem is None and ok(res, sel)
            if whole or not good:
                self._log(
                    group,
                    res,
                    f"{len(sel)} run(s), {n} trials" if len(sel) > 1 else f"run {sel[0]}",
                )
            if good or len(sel) == 1:
                done.append((res, sel))
                if not good:
                    self.not_ok.add(id(res))
                return not good
            size = len(sel) if len(sel) <= 6 else -(-len(sel) // max(2, round(len(sel) ** 0.5)))
            size = 1 if size >= len(sel) else size
            pinned = [attempt(sel[i : i + size], False) for i in range(0, len(sel), size)]
            if not any(pinned):  # fails only with these runs together
                self.unpinned.append((res, sel, group))
            return True

        if healthy:
            attempt(healthy, whole=not suspect)
        for run in runs:
            if run in suspect:
                attempt([run], False)
        return done

    @staticmethod
    def failed_runs(
        pairs: list[tuple[CommandResult, list[str]]], ok: Callable[[CommandResult, list[str]], bool]
    ) -> set[str]:
        return {
            run
            for res, sel in pairs
            if len(sel) == 1 and (res.problem or not ok(res, sel))
            for run in sel
        }

    def _log(self, group: str, res: CommandResult, what: str) -> None:
        state = res.problem or f"exit {res.returncode}"
        print(
            f"  [{group}] {res.stage} ({what}): {state} in {res.seconds:.1f} s"
            + (f": {last_error_line(res.text)[:160]}" if res.problem or res.returncode else ""),
            flush=True,
        )

    def command_findings(self, group: str, pairs: list[tuple[CommandResult, list[str]]]) -> None:
        for res, runs in pairs:
            problem = res.problem or ("aborted" if id(res) in self.not_ok else None)
            if problem:
                recs = [r for run in runs for r in self.by_run[(group, run)]]
                rec = recs[0] if recs else None
                mutation = rec.mutation if len(runs) == 1 and rec else f"(group {group})"
                self.findings.add(
                    problem,
                    mutation,
                    self.example(
                        rec if len(runs) == 1 else None,
                        res.stage,
                        last_error_line(res.text)
                        or f"killed after {res.seconds:.0f} s without an answer",
                        command="retrieval-lib " + " ".join(res.argv),
                        exit=res.returncode,
                        seconds=round(res.seconds, 1),
                        runs=runs[:3],
                    ),
                )

    # -- per group
    def process(self, group: str) -> None:
        runs_root = self.groups[group]["runs"]
        tasks_root = self.groups[group]["tasks"]
        out = self.work / "out" / group
        study_out = self.work / "study" / group
        runs = sorted({r.run_id for r in self.records if r.group == group})
        before = snapshot(self.work / "input" / group)
        outside_before = snapshot(self.work / "outside")

        def workers(sel: list[str]) -> list[str]:
            small = sum(len(self.by_run[(group, r)]) for r in sel) < 16
            return ["--workers", "1" if small else str(self.args.workers)]

        def norm_args(sel: list[str] | None) -> list[str]:
            paths = [str(runs_root)] if sel is None else [str(runs_root / s) for s in sel]
            return [
                "normalize",
                *paths,
                "--tasks-root",
                str(tasks_root),
                "--out",
                str(out),
                *workers(sel or runs),
            ]

        norm_ok = lambda r, sel: "normalized " in r.stdout  # noqa: E731
        norm = self.run_stage("normalize", group, norm_args, runs, ok=norm_ok)
        self.command_findings(group, norm)
        self.reconcile_normalize(group, norm, out)
        # a run whose normalisation hung would hang the study's normalisation too
        hung = {run for res, sel in norm if res.problem == "hang" for run in sel}
        suspect = self.failed_runs(norm, norm_ok)
        live = [r for r in runs if r not in hung]

        if "evaluate" in self.args.stages and live:

            def eval_args(sel: list[str] | None) -> list[str]:
                chosen = [str(out / s) for s in (sel or live) if (out / s).is_dir()]
                return ["evaluate", *(chosen or [str(out / (sel or live)[0])])]

            def eval_ok(res: CommandResult, sel: list[str]) -> bool:
                # every run with documents evaluated: none skipped by an abort or refused.
                # A run left with no document at all (normalize named every trial as
                # left out or failed) is refused by name: that is its per-run report.
                return all(
                    f"/{run}/retrieval_events: " in res.stdout
                    or (
                        not self.has_documents(group, run)
                        and f"/{run}/retrieval_events" in res.stderr
                        and "no retrieval-event documents" in res.stderr
                    )
                    for run in sel
                    if (out / run).is_dir()
                )

            ev = self.run_stage("evaluate", group, eval_args, live, ok=eval_ok, suspect=suspect)
            self.command_findings(group, ev)
            self.reconcile_evaluate(group, ev, out)

        if "study" in self.args.stages and live:

            def study_args(sel: list[str] | None) -> list[str]:
                paths = [str(runs_root)] if sel is None else [str(runs_root / s) for s in sel]
                extra = [] if (self.args.study_report and sel is None) else ["--no-report"]
                target = study_out / "part" / sel[0] if sel is not None else study_out
                return [
                    "study",
                    *paths,
                    "--tasks-root",
                    str(tasks_root),
                    "--out",
                    str(target),
                    *workers(sel or live),
                    *extra,
                ]

            def study_ok(res: CommandResult, sel: list[str]) -> bool:
                # exit 0; or runs that kept no document at all (normalize named every
                # trial), studied on their own and refused by name: nothing to study
                return res.returncode == 0 or (
                    res.returncode == 1
                    and not any(self.has_documents(group, run) for run in sel)
                    and all(f"/{run}" in res.stderr for run in sel)
                    and "no evaluated run to study" in res.stderr
                )

            st = self.run_stage("study", group, study_args, live, ok=study_ok, suspect=suspect)
            self.command_findings(group, st)
            self.reconcile_study(group, st, study_out, skip=hung)

        after = snapshot(self.work / "input" / group)
        self.compare_snapshots(group, before, after, "input")
        self.compare_snapshots(group, outside_before, snapshot(self.work / "outside"), "outside")

    # -- checks
    def has_documents(self, group: str, run: str) -> bool:
        """Whether ``normalize`` wrote any document of ``run`` (its trials' records)."""
        return any(key.startswith(f"{run}/") for key in getattr(self, "documents", {}))

    def _trial_of(self, group: str, rel: str) -> TrialRecord | None:
        parts = Path(rel).parts
        for i in range(len(parts), 0, -1):
            rec = self._by_path.get((group, "/".join(parts[:i])))
            if rec:
                return rec
        return None

    @property
    def _by_path(self) -> dict[tuple[str, str], TrialRecord]:
        if not hasattr(self, "_paths_cache"):
            self._paths_cache = {(r.group, r.trial_path): r for r in self.records}
            # a task mutation's trials are the reproducers of its task folder
            for r in self.records:
                if r.task:
                    for d in (self.groups[r.group]["tasks"]).glob(f"*/{r.task}"):
                        rel = str(d.relative_to(self.groups[r.group]["tasks"].parent))
                        self._paths_cache.setdefault((r.group, rel), r)
        return self._paths_cache

    def compare_snapshots(self, group: str, before: dict, after: dict, where: str) -> None:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        for rel in changed:
            rec = self._trial_of(group, rel[len("runs/") :]) if rel.startswith("runs/") else None
            if rec is None and rel.startswith("benchmarks/"):
                rec = self._by_path.get((group, "/".join(Path(rel).parts[:3])))
            what = "created" if rel not in before else "removed" if rel not in after else "modified"
            self.findings.add(
                "input_changed",
                rec.mutation if rec else f"({where} of group {group})",
                self.example(
                    rec,
                    "all",
                    f"{where}/{rel} {what}",
                    before=str(before.get(rel))[:200],
                    after=str(after.get(rel))[:200],
                ),
            )

    def _check_json(self, path: Path, kind: str) -> tuple[dict | None, str | None]:
        from retrieval_lib.events.document import validate_document
        from retrieval_lib.metrics.stages import validate_metrics_record
        from retrieval_lib.metrics.summary import validate_summary

        try:
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return None, f"unreadable: {exc}"

        def bad_constant(name: str) -> Any:
            raise ValueError(f"non-standard JSON constant {name}")

        try:
            doc = json.loads(text, parse_constant=bad_constant)
        except (ValueError, RecursionError) as exc:
            return None, f"not strict JSON: {exc}"
        try:
            {
                "events": validate_document,
                "metrics": validate_metrics_record,
                "summary": validate_summary,
            }[kind](doc, where=str(path.name))
        except Exception as exc:  # noqa: BLE001 - any failure of the validator is a finding
            return doc, f"{type(exc).__name__}: {exc}"
        return doc, None

    def _named(self, text: str, rec: TrialRecord) -> bool:
        return rec.folder in text or (rec.folder.rsplit("__", 1)[-1] in text and "__" in text)

    def reconcile_normalize(
        self, group: str, pairs: list[tuple[CommandResult, list[str]]], out: Path
    ) -> None:
        text = "\n".join([*(res.text for res, _ in pairs), *_report_texts(out)])
        documents: dict[str, Path] = {}
        for path in sorted(out.rglob("*.retrieval_events.json")) if out.is_dir() else []:
            if path.is_symlink() or not path.is_file():
                continue
            doc, problem = self._check_json(path, "events")
            rel_trial = None
            if isinstance(doc, dict):
                prov = doc.get("provenance") or {}
                rel_trial = prov.get("trial_path")
                run_id = prov.get("run_id")
                if rel_trial:
                    documents[f"{run_id}/{rel_trial}"] = path
            rec = (
                self._by_path.get((group, f"{doc['provenance']['run_id']}/{rel_trial}"))
                if rel_trial
                else None
            )
            if problem:
                self.findings.add(
                    "schema_invalid",
                    rec.mutation if rec else f"(group {group})",
                    self.example(
                        rec, "normalize", problem, document=str(path.relative_to(self.work))
                    ),
                )
        failed_lines = [ln for ln in text.splitlines() if ln.startswith("failed: ")]
        broken = _broken(pairs)
        for rec in (r for r in self.records if r.group == group):
            if rec.run_id in broken:
                self.outcomes["normalize: command crashed or hung"] += 1
                continue
            if rec.trial_path in documents:
                self.outcomes["normalize: document"] += 1
                continue
            lines = [ln for ln in failed_lines if rec.folder in ln]
            if lines:
                message = lines[0].split(": ", 2)[-1]
                if _PY_EXC.match(message) or re.match(r"^[A-Z]\w+(Error|Exception): ", message):
                    self.outcomes["normalize: failed (bare Python exception)"] += 1
                    self.findings.add(
                        "internal_error", rec.mutation, self.example(rec, "normalize", message)
                    )
                else:
                    self.outcomes["normalize: failed with a message"] += 1
                continue
            if self._named(text, rec):
                self.outcomes["normalize: named in an error"] += 1
                continue
            self.outcomes["normalize: lost"] += 1
            self.findings.add(
                "lost",
                rec.mutation,
                self.example(
                    rec,
                    "normalize",
                    "no document and not named in the output: "
                    + (last_error_line(_text_for(pairs, rec.run_id)) or "(no message)"),
                ),
            )
        self.documents = documents

    def reconcile_evaluate(
        self, group: str, pairs: list[tuple[CommandResult, list[str]]], out: Path
    ) -> None:
        text = "\n".join(res.text for res, _ in pairs)
        for line in text.splitlines():
            if _PY_EXC.search(line) and ("invalid document" in line or "error" in line):
                rec = next((r for r in self.records if r.group == group and r.folder in line), None)
                run = next(
                    (r for r in {x.run_id for x in self.records if x.group == group} if r in line),
                    None,
                )
                if rec is None and run:
                    rec = self.by_run[(group, run)][0]
                self.findings.add(
                    "internal_error",
                    rec.mutation if rec else f"(group {group})",
                    self.example(rec, "evaluate", line),
                )
        broken = _broken(pairs)
        for key, doc_path in sorted(self.documents.items()):
            rec = self._by_path.get((group, key))
            if key.split("/")[0] in broken:
                continue
            metrics = doc_path.with_name(
                doc_path.name.replace(".retrieval_events.json", ".retrieval_metrics.json")
            )
            if metrics.is_file():
                _, problem = self._check_json(metrics, "metrics")
                if problem:
                    self.findings.add(
                        "schema_invalid",
                        rec.mutation if rec else f"(group {group})",
                        self.example(
                            rec, "evaluate", problem, document=str(metrics.relative_to(self.work))
                        ),
                    )
                continue
            if doc_path.name in text or (rec and self._named(text, rec)):
                continue
            self.findings.add(
                "lost",
                rec.mutation if rec else f"(group {group})",
                self.example(
                    rec,
                    "evaluate",
                    "document has no metrics record and is not named: "
                    + (last_error_line(_text_for(pairs, key.split("/")[0])) or "(no message)"),
                ),
            )
        for summary in sorted(out.rglob("run_retrieval_summary.json")) if out.is_dir() else []:
            _, problem = self._check_json(summary, "summary")
            if problem:
                run = summary.relative_to(out).parts[0]
                recs = self.by_run.get((group, run)) or [None]
                rec = recs[0]
                self.findings.add(
                    "schema_invalid",
                    rec.mutation if rec else f"(group {group})",
                    self.example(
                        rec, "evaluate", problem, document=str(summary.relative_to(self.work))
                    ),
                )

    def reconcile_study(
        self,
        group: str,
        pairs: list[tuple[CommandResult, list[str]]],
        study_out: Path,
        skip: set[str],
    ) -> None:
        import pandas as pd

        texts = [res.text for res, _ in pairs]
        present: set[str] = set()
        for table in list(study_out.rglob("study/tables/trials.parquet")) + list(
            study_out.rglob("study/tables/trials.csv")
        ):
            frame = pd.read_parquet(table) if table.suffix == ".parquet" else pd.read_csv(table)
            for column in ("trial_name", "source_document", "trial_id"):
                if column in frame:
                    present.update(str(v) for v in frame[column].dropna())
        texts.extend(_report_texts(study_out))
        blob = "\n".join(texts)
        present_blob = "\n".join(sorted(present))
        for line in blob.splitlines():
            if _PY_EXC.search(line) and len(line) < 2000:
                rec = next((r for r in self.records if r.group == group and r.folder in line), None)
                if rec is not None or "failed" in line:
                    if rec is None:
                        run = next(
                            (
                                r
                                for r in {x.run_id for x in self.records if x.group == group}
                                if r in line
                            ),
                            None,
                        )
                        rec = self.by_run[(group, run)][0] if run else None
                    self.findings.add(
                        "internal_error",
                        rec.mutation if rec else f"(group {group})",
                        self.example(rec, "study", line.strip()[:400]),
                    )
        for rec in (
            r for r in self.records if r.group == group and r.run_id not in skip | _broken(pairs)
        ):
            if rec.folder in present_blob or rec.folder.rsplit("__", 1)[-1] in present_blob:
                continue
            if self._named(blob, rec):
                continue
            self.findings.add(
                "lost",
                rec.mutation,
                self.example(
                    rec,
                    "study",
                    "not in the study's trials table and not named: "
                    + (last_error_line(_text_for(pairs, rec.run_id)) or "(no message)"),
                ),
            )


_REPORT_NAME = re.compile(r"fail|left|skip|report|summary|study_inputs|exclu|warn|refus|error")
_OUTPUT_SUFFIXES = (".retrieval_events.json", ".retrieval_metrics.json")


def _report_texts(root: Path) -> list[str]:
    """Reports an output folder holds that may name left-out trials: files whose name says
    so (failed, left out, skipped, report, summary, warnings, ``study_inputs.json``) and
    HTML reports; never the documents, metrics records or a record of every input (which
    would name every trial)."""
    texts = []
    for path in sorted(root.rglob("*")) if root.is_dir() else []:
        name = path.name.lower()
        if name.endswith(_OUTPUT_SUFFIXES) or path.suffix not in (
            ".json",
            ".txt",
            ".log",
            ".md",
            ".csv",
            ".html",
            ".jsonl",
            ".tsv",
        ):
            continue
        if (path.suffix == ".html" or _REPORT_NAME.search(name)) and path.is_file():
            with contextlib.suppress(OSError):
                if path.stat().st_size < 50_000_000:
                    texts.append(path.read_text(errors="replace"))
    return texts


def _broken(pairs: list[tuple[CommandResult, list[str]]]) -> set[str]:
    """Runs whose command crashed or hung (reported as such, not also as lost)."""
    return {run for res, sel in pairs if res.problem in ("crash", "hang") for run in sel}


def _text_for(pairs: list[tuple[CommandResult, list[str]]], run: str) -> str:
    """What the command that covered ``run`` printed."""
    return "\n".join(res.text for res, sel in pairs if run in sel)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus",
        type=Path,
        default=default_corpus(),
        help="the real sample (read only; default ../shared/corpus/csb)",
    )
    parser.add_argument(
        "--trials", type=int, default=10_000, help="mutated trials (default 10,000)"
    )
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--per-run", type=int, default=400, help="trials per run folder at most")
    parser.add_argument("--mutations", default="", help="comma-separated mutation names only")
    parser.add_argument("--stages", default="normalize,evaluate,study")
    parser.add_argument(
        "--study-report",
        action="store_true",
        help="render the study notebook/HTML of each group (slow); default --no-report",
    )
    parser.add_argument(
        "--seconds-per-trial",
        type=float,
        default=0.05,
        help="expected normalize CPU seconds per trial, for the timeouts",
    )
    parser.add_argument("--timeout-factor", type=float, default=1.0)
    parser.add_argument(
        "--memory-gb", type=float, default=6.0, help="address-space limit per command"
    )
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--out", type=Path, default=HERE / "out" / "fuzz.json")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = parser.parse_args(argv)
    args.stages = set(args.stages.split(","))
    if args.list:
        for m in build_catalogue():
            print(f"{m.name:40s} {m.kind:8s} {m.group:20s} {m.target}")
        return 0
    corpus = args.corpus.resolve()
    if not (corpus / "runs").is_dir():
        print(f"no corpus at {corpus} (--corpus)", file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="rl-fuzz-"))
    if work.exists() and any(work.iterdir()):
        print(f"--work {work} is not empty", file=sys.stderr)
        return 2
    work.mkdir(parents=True, exist_ok=True)
    corpus_before = snapshot(corpus)
    t0 = time.perf_counter()
    only = {m for m in args.mutations.split(",") if m} or None
    records, groups = generate(corpus, work, args.trials, args.seed, only, args.per_run)
    t_gen = time.perf_counter() - t0
    n_tasks = len({r.task for r in records if r.group.startswith("task")})
    print(
        f"generated {len(records)} mutated trials ({n_tasks} mutated task folders, "
        f"{len({r.mutation for r in records})} mutations) in {len(groups)} groups, "
        f"{len({(r.group, r.run_id) for r in records})} runs, in {t_gen:.1f} s under {work}",
        flush=True,
    )
    with open(work / "manifest.jsonl", "w") as handle:
        for rec in records:
            handle.write(json.dumps(asdict(rec), ensure_ascii=True) + "\n")
    fuzz = Fuzz(args, work, records, groups)
    order = sorted(groups, key=lambda g: (g != "bulk", g))
    for group in order:
        fuzz.process(group)
    for res, sel, group in fuzz.unpinned:
        fuzz.findings.add(
            res.problem if res.problem in ("crash", "hang") else "aborted",
            f"({group}: {len(sel)} runs together)",
            fuzz.example(
                None,
                res.stage,
                last_error_line(res.text),
                command="retrieval-lib " + " ".join(res.argv)[:400],
                exit=res.returncode,
                note="every part of these runs passes alone: an interaction (e.g. pooled values)",
            ),
        )
    if snapshot(corpus) != corpus_before:
        fuzz.findings.add("input_changed", "(corpus)", {"error": f"{corpus} changed"})
    seconds = time.perf_counter() - t0
    report = summarise(args, fuzz, records, seconds, t_gen, work)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"\nwrote {args.out}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"kept {work}")
    return 0 if report["total_failures"] == 0 else 1


def summarise(
    args, fuzz: Fuzz, records: list[TrialRecord], seconds: float, t_gen: float, work: Path
) -> dict:
    f = fuzz.findings
    per_mutation = collections.Counter(r.mutation for r in records)
    print(
        f"\n{len(records)} mutated trials, {len(per_mutation)} mutations, seed {args.seed}: "
        f"{seconds:.0f} s (generation {t_gen:.0f} s; {len(fuzz.commands)} commands); "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print("\n| failure class | count | mutations | example (mutation: error) |\n|---|---|---|---|")
    for cls in FAILURE_CLASSES:
        counts = f.counts[cls]
        first = next(iter(sorted(counts, key=lambda m: -counts[m])), None)
        ex = f.examples[cls].get(first, {}) if first else {}
        shown = f"{first}: {ex.get('error', '')[:90]}" if first else ""
        print(f"| {cls} | {sum(counts.values())} | {len(counts)} | {shown.replace('|', '/')} |")
    print(
        "\nnormalize outcome per mutated trial: "
        + ", ".join(f"{k.split(': ', 1)[1]} {v}" for k, v in sorted(fuzz.outcomes.items()))
    )
    print(
        "\nby stage: "
        + "; ".join(
            f"{cls}: " + ", ".join(f"{st} {n}" for st, n in sorted(f.by_stage[cls].items()))
            for cls in FAILURE_CLASSES
            if f.by_stage[cls]
        )
    )
    print("\nby mutation (failing ones):")
    rows = collections.defaultdict(dict)
    for cls in FAILURE_CLASSES:
        for m, n in f.counts[cls].items():
            rows[m][cls] = n
    for m in sorted(rows):
        total = per_mutation.get(m, "")
        cells = ", ".join(f"{c} {rows[m][c]}" for c in FAILURE_CLASSES if c in rows[m])
        print(f"  {m} ({total} trials): {cells}")
    stages = collections.defaultdict(float)
    for c in fuzz.commands:
        stages[c.stage] += c.seconds
    return {
        "seed": args.seed,
        "trials": len(records),
        "mutated_task_folders": len({r.task for r in records if r.group.startswith("task")}),
        "mutations": dict(sorted(per_mutation.items())),
        "seconds": round(seconds, 1),
        "generation_seconds": round(t_gen, 1),
        "stage_seconds": {k: round(v, 1) for k, v in stages.items()},
        "commands": len(fuzz.commands),
        "load_average": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "totals": {c: sum(f.counts[c].values()) for c in FAILURE_CLASSES},
        "total_failures": sum(sum(f.counts[c].values()) for c in FAILURE_CLASSES),
        "by_class": {c: dict(sorted(f.counts[c].items())) for c in FAILURE_CLASSES},
        "by_stage": {c: dict(sorted(f.by_stage[c].items())) for c in FAILURE_CLASSES},
        "normalize_outcomes": dict(sorted(fuzz.outcomes.items())),
        "reproducers": f.examples,
        "command_log": [
            {
                "stage": c.stage,
                "argv": " ".join(c.argv)[:300],
                "exit": c.returncode,
                "seconds": round(c.seconds, 1),
                "problem": c.problem,
            }
            for c in fuzz.commands
        ],
        "work": str(work) if args.keep else None,
    }


if __name__ == "__main__":
    sys.exit(main())
