"""Shell-command reading: :func:`retrieval_lib.traces.shell.parse_shell_command` per command.

Times the parse of typical agent shell lines (a ``find -exec grep`` pipeline, a ``cd &&
sed -n && grep | head`` chain, a ``pytest | tail``), ``--n`` times each, against the
reference in the same run: ``shlex.split`` of the same lines, the tokenising that any
reading of a command line has to do at least. CPU time (``time.process_time``) and wall
time, the median of ``--repeats``; the figure to compare across machines is the ratio to
the reference. Results are printed and written to ``benchmarks/out/shell.json``.

This replaces the timed unit test ``tests/traces/test_shell.py::test_speed`` (speed is
measured here, as a ratio, never as a threshold in a unit test).

Usage::

    .venv/bin/python benchmarks/shell.py               # 3 x 1,000 commands
    .venv/bin/python benchmarks/shell.py --n 10000 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from collections.abc import Callable
from pathlib import Path

from _measure import cpu_and_wall

from retrieval_lib.traces.shell import parse_shell_command

COMMANDS = (
    'find /workspace -type f \\( -name "*.py" -o -name "*.txt" \\) -exec grep -l x {} \\; | sort',
    "cd /workspace/src && sed -n '10,40p' app.py && grep -rn foo . | head -20",
    "python -m pytest tests/test_x.py -q 2>&1 | tail -20",
)


def _run_all(parse: Callable[[str], object], commands: list[str]) -> None:
    for command in commands:
        parse(command)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="repetitions of each command")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "out"))
    args = parser.parse_args()

    commands = list(COMMANDS) * args.n
    jobs: dict[str, Callable[[], object]] = {
        "reference: shlex.split": lambda: _run_all(shlex.split, commands),
        "parse_shell_command": lambda: _run_all(parse_shell_command, commands),
    }
    results = {}
    for name, job in jobs.items():
        cpu, wall = cpu_and_wall(job, args.repeats)
        results[name] = {"cpu_s": cpu, "wall_s": wall, "us_per_command": 1e6 * cpu / len(commands)}
    ref = results["reference: shlex.split"]["cpu_s"]
    print(f"{len(commands):,} commands; load average {os.getloadavg()[0]:.1f}")
    print(f"{'method':28} {'CPU s':>8} {'wall s':>8} {'CPU us/cmd':>11} {'x reference':>12}")
    for name, r in results.items():
        r["ratio_cpu"] = r["cpu_s"] / ref if ref else float("nan")
        print(
            f"{name:28} {r['cpu_s']:8.3f} {r['wall_s']:8.3f} "
            f"{r['us_per_command']:11.1f} {r['ratio_cpu']:12.2f}"
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    document = {
        "commands": len(commands),
        "repeats": args.repeats,
        "load_average": os.getloadavg()[0],
        "results": results,
    }
    (out / "shell.json").write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
