"""Measuring helpers the benchmark scripts share (imported as ``_measure``: each script runs
with ``benchmarks/`` first on its path)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

#: Runs the command given after it as a grandchild and prints its peak RSS (``ru_maxrss``
#: of the children) as ``RSS_KB=<n>``: ``[sys.executable, "-c", RSS_WRAPPER, *command]``.
RSS_WRAPPER = (
    "import resource, subprocess, sys\n"
    "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr)\n"
    "print('RSS_KB=%d' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(p.returncode)\n"
)


def cpu_and_wall(job: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median CPU seconds (``time.process_time``) and wall seconds of ``repeats`` runs."""
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        job()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall)


def process_tree(root_pid: int) -> dict[int, tuple[int, float]]:
    """``pid -> (resident bytes, CPU seconds)`` of ``root_pid`` and every descendant alive,
    from ``/proc/<pid>/stat`` (CPU: user + system, own and of waited-for children)."""
    page, tick = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    facts: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            ppid, pages = int(fields[1]), int(fields[21])
            cpu = sum(int(v) for v in fields[11:15]) / tick
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
        facts[int(entry)] = (pages * page, cpu)
    tree: dict[int, tuple[int, float]] = {}
    todo = [root_pid]
    while todo:
        pid = todo.pop()
        tree[pid] = facts.get(pid, (0, 0.0))
        todo.extend(children.get(pid, []))
    return tree
