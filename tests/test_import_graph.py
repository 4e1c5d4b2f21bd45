"""The package's modules and packages import one another without a circle or a private name.

Every ``import`` and ``from … import`` of ``retrieval_lib`` in every module counts, at
module level or inside a function (a lazy import hides a circle at run time, it does not
remove it) and under ``TYPE_CHECKING``. ``from pkg import name`` points at the submodule
``pkg.name`` when there is one, else at ``pkg`` itself.

Two more rules keep the layers true:

* **no circle between packages** either: each module counts as its top-level unit
  (``retrieval_lib.report.tables`` is ``retrieval_lib.report``), so ``study`` importing
  ``report`` while ``report`` imports ``study`` is a circle even when no two modules form one;
* **data flows one way**: every top-level unit sits in one of :data:`LAYERS` (traces →
  events → metrics → statistics → study → tables/figures/reports → CLI) and imports only
  from its own layer or a lower one;
* **a private name stays home**: ``_name`` (not a dunder) is private to the module that
  defines it, and a private module ``pkg._mod`` to its package ``pkg``. Importing it
  (``from m import _x``), or reaching it through a module bound to a name (``m._x``,
  ``getattr(m, "_x")``), from elsewhere is a defect: a helper that two modules share is
  public.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "retrieval_lib"


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The module ``name`` is, or lives in (None outside the package)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*kept, base] if base else kept)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
        owners = {_owner(t, modules) for t in targets}
        graph[name] = {o for o in owners if o is not None and o != name}
    return graph


def _unit(module: str) -> str:
    """The top-level unit of ``module``: ``retrieval_lib.<first component>``."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Top-level unit -> the other units its modules import."""
    units: dict[str, set[str]] = {}
    for module, targets in graph.items():
        unit = _unit(module)
        units.setdefault(unit, set()).update(_unit(t) for t in targets if _unit(t) != unit)
    return units


#: The layers of the package, lowest first: a unit imports only from its layer or below.
LAYERS: tuple[tuple[str, ...], ...] = (
    # foundations: errors, file and text helpers, lazy heavy imports, the process pool
    ("", "bundled", "errors", "io", "lazylibs", "parallel", "paths", "safe_text", "suggest"),
    # inputs: run folders and results, task definitions and ground truth, traces, synth data
    ("ground_truth", "harness", "runs", "synth", "task_text", "traces"),
    # events: the documents, and the completion records of the folders holding them
    ("completion", "events"),
    # traces -> events for whole runs; metrics from the documents; TREC scoring
    ("metrics", "normalize", "trec"),
    # statistics over the metrics tables; the RAG knowledge base; many runs on a pool or Dask
    ("distributed", "kb", "run_many", "stats"),
    # many runs pooled; TREC export by config family
    ("study", "trec_export"),
    # tables, figures, notebooks and HTML reports
    ("report",),
    # the command line
    ("__main__", "cli"),
)


def _layer_of(unit: str) -> int | None:
    name = unit.partition(".")[2]
    return next((i for i, names in enumerate(LAYERS) if name in names), None)


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a higher layer, and units missing from :data:`LAYERS`."""
    found = []
    for module, targets in sorted(graph.items()):
        layer = _layer_of(_unit(module))
        if layer is None:
            found.append(f"{_unit(module)} is in no layer: add it to LAYERS")
            continue
        for target in sorted(targets):
            target_layer = _layer_of(_unit(target))
            if target_layer is not None and target_layer > layer:
                found.append(f"{module} (layer {layer}) imports {target} (layer {target_layer})")
    return sorted(set(found))


def _is_private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _private_scope(target: str) -> str | None:
    """Where ``target`` (a dotted module path, maybe ending in a name) may be used from.

    The prefix before its first private component: the module a private name lives in,
    or the package a private module lives in. None when nothing in it is private.
    """
    parts = target.split(".")
    for i, part in enumerate(parts):
        if _is_private(part):
            return ".".join(parts[:i])
    return None


def _resolve_from(node: ast.ImportFrom, package: str) -> str:
    base = node.module or ""
    if node.level:
        kept = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*kept, base] if base else kept)
    return base


def private_uses(sources: dict[str, tuple[Path, str]] | None = None) -> list[str]:
    """Every use of a private name outside its home, as ``"module:line: target"``.

    ``sources`` maps a module name to (path, source text); default: the package.
    """
    if sources is None:
        sources = {n: (p, p.read_text(encoding="utf-8")) for n, p in _modules().items()}
    modules = set(sources)
    found: list[str] = []

    def check(name: str, line: int, target: str) -> None:
        scope = _private_scope(target)
        if scope is None or not target.startswith("retrieval_lib"):
            return
        if name != scope and not name.startswith(scope + "."):
            found.append(f"{name}:{line}: {target}")

    for name, (path, text) in sorted(sources.items()):
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(text)
        bound: dict[str, str] = {}  # local name -> the package module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    check(name, node.lineno, alias.name)
                    if alias.asname and alias.name in modules:
                        bound[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                base = _resolve_from(node, package)
                for alias in node.names:
                    check(name, node.lineno, f"{base}.{alias.name}")
                    if f"{base}.{alias.name}" in modules:
                        bound[alias.asname or alias.name] = f"{base}.{alias.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _is_private(node.attr):
                chain, value = [node.attr], node.value
                while isinstance(value, ast.Attribute):
                    chain.append(value.attr)
                    value = value.value
                if isinstance(value, ast.Name):
                    head = bound.get(value.id, value.id if value.id == "retrieval_lib" else None)
                    if head is not None:
                        check(name, node.lineno, ".".join([head, *reversed(chain)]))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr", "setattr")
                and len(node.args) >= 2
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id in bound
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                check(name, node.lineno, f"{bound[node.args[0].id]}.{node.args[1].value}")
    return sorted(set(found), key=lambda s: (s.split(":")[0], int(s.split(":")[1]), s))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_sees_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_lazy_imports():
    graph = import_graph()
    # kb.store imports the columns inside functions (so opening a store needs no numpy)
    assert "retrieval_lib.kb.columns" in graph["retrieval_lib.kb.store"]
    assert "retrieval_lib.kb.definitions" in graph["retrieval_lib.kb.metrics"]


def test_no_import_circle_in_the_package():
    assert cycles(import_graph()) == []


def test_kb_definitions_import_nothing_of_the_package():
    assert import_graph()["retrieval_lib.kb.definitions"] == set()


def test_no_import_circle_between_packages():
    assert cycles(package_graph(import_graph())) == []


def test_the_package_graph_sees_a_circle_through_different_modules():
    graph = {
        "retrieval_lib.study.core": {"retrieval_lib.report.tables"},
        "retrieval_lib.report.tables": {"retrieval_lib.stats.clustered"},
        "retrieval_lib.report.pipeline": {"retrieval_lib.study.loader"},
        "retrieval_lib.study.loader": set(),
        "retrieval_lib.stats.clustered": set(),
    }
    assert cycles(graph) == []  # no circle of modules ...
    assert cycles(package_graph(graph)) == [["retrieval_lib.report", "retrieval_lib.study"]]


def test_data_flows_one_way_through_the_layers():
    found = layer_violations(import_graph())
    assert not found, "\n".join(found)


def test_the_layer_check_sees_an_upward_import_and_an_unplaced_unit():
    graph = {
        "retrieval_lib.events.build": {"retrieval_lib.metrics.stages"},  # events -> metrics
        "retrieval_lib.metrics.stages": {"retrieval_lib.events.document"},  # down: fine
        "retrieval_lib.events.document": {"retrieval_lib.io"},
        "retrieval_lib.io": set(),
        "retrieval_lib.newthing": set(),
    }
    assert layer_violations(graph) == [
        "retrieval_lib.events.build (layer 2) imports retrieval_lib.metrics.stages (layer 3)",
        "retrieval_lib.newthing is in no layer: add it to LAYERS",
    ]


def test_the_private_name_finder_sees_every_form():
    sources = {
        "retrieval_lib.a": "def _helper(): ...\n_helper()\n",
        "retrieval_lib.b": (
            "from retrieval_lib.a import _helper\n"  # 1: from-import
            "def f():\n"
            "    from retrieval_lib import a\n"
            "    a._helper()\n"  # 4: attribute of a bound module, in a function
            "    return getattr(a, '_helper')\n"  # 5: getattr of a bound module
        ),
        "retrieval_lib.c": "import retrieval_lib.a\nretrieval_lib.a._helper()\n",
        "retrieval_lib.d": "import retrieval_lib.a as m\nx = m.__name__\n",  # dunder: fine
        "retrieval_lib.pkg": "",
        "retrieval_lib.pkg._kernel": "def hits(): ...\n",
        "retrieval_lib.pkg.ranking": "from retrieval_lib.pkg._kernel import hits\n",  # home
        "retrieval_lib.pkg.sub": "from ._kernel import hits\n",  # relative, still home
        "retrieval_lib.other": "from retrieval_lib.pkg._kernel import hits\n",
    }
    paths = {n: (Path(n.replace(".", "/") + ".py"), t) for n, t in sources.items()}
    paths["retrieval_lib.pkg"] = (Path("retrieval_lib/pkg/__init__.py"), "")
    assert private_uses(paths) == [
        "retrieval_lib.b:1: retrieval_lib.a._helper",
        "retrieval_lib.b:4: retrieval_lib.a._helper",
        "retrieval_lib.b:5: retrieval_lib.a._helper",
        "retrieval_lib.c:2: retrieval_lib.a._helper",
        "retrieval_lib.other:1: retrieval_lib.pkg._kernel.hits",
    ]


def test_no_private_name_is_used_outside_its_module():
    found = private_uses()
    assert not found, "private names used outside their module:\n" + "\n".join(found)
