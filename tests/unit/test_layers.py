"""The layers of okapikv: which package may import which, and no import circles (docs/design.md,
"Layers").

Every module under ``src/okapikv`` is parsed (never imported) and every import in it counts, wherever
it stands: at module level, inside a function, and under ``if TYPE_CHECKING``. A function-level
import is a dependency that is only paid later (the function cannot run without the other module),
and a TYPE_CHECKING import is a dependency of the code's meaning (its types are the other module's):
either way the two modules cannot be changed or understood apart, so both are arrows of the graph,
for the layer rules and for circles alike. ``importlib.import_module("okapikv....")`` and
``__import__`` with a constant name count too. ``from package import name`` is an arrow to the
module ``package.name`` when there is one, else to the package. The ``okapi`` command's dispatch by
name (``okapikv.cli``, "module:function" strings) is not followed: the command may import
everything.

A module belongs to the longest entry of ``LAYERS`` that names it or a package above it (the entry
``okapikv`` names the package's own ``__init__`` only). An import is allowed inside its entry and
into the entries its row lists (a row may name a single module of another entry, e.g. the
stdin/stdout client's use of the cluster config). The table itself is a DAG, so the package graph
has no circle; circles between modules (inside one package too) are checked separately.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

CORE = "okapikv.core"
#: Leaf modules of their own: library errors, TLS settings, TCP socket options, child processes
#: that end with their parent.
LEAVES = {"okapikv.errors", "okapikv.tls", "okapikv.tcp", "okapikv.lifetime"}
CLIENT_BELOW = {CORE, "okapikv.wire", *LEAVES}
SERVER_BELOW = {CORE, "okapikv.wire", "okapikv.storage", "okapikv.cluster", *LEAVES}

#: entry -> what its modules may import besides the entry itself.
LAYERS: dict[str, set[str]] = {
    CORE: set(),  # pure: no I/O, clock or randomness (also tests/unit/test_core_purity.py)
    **{leaf: set() for leaf in LEAVES},
    "okapikv.check": {CORE},  # pure functions of a history
    "okapikv.sim": {CORE, "okapikv.check"},  # the simulator drives the core and checks the history
    "okapikv.wire": {CORE},  # protobuf <-> core messages, framing
    "okapikv.storage": {CORE},  # durable state of one partition server
    "okapikv.cluster": {CORE, "okapikv.wire", "okapikv.tls", "okapikv.lifetime"},  # config, launcher, status
    "okapikv.client": CLIENT_BELOW,  # never the server, never the cluster package
    # ``okapi client`` finds the local cluster from its config file (and nothing else of cluster/)
    "okapikv.client.stdio": {*CLIENT_BELOW, "okapikv.client", "okapikv.cluster.config"},
    "okapikv": {"okapikv.client"},  # the package: __version__, Client and AsyncClient (lazily)
    "okapikv.server": SERVER_BELOW,  # never a client, never the RESP port
    # the RESP port: a listener of the server that forwards through the client library
    "okapikv.resp": {*SERVER_BELOW, "okapikv", "okapikv.server", "okapikv.client"},
    # a server process is assembled from its listeners, the RESP port among them
    "okapikv.server.app": {*SERVER_BELOW, "okapikv.server", "okapikv.resp"},
    "okapikv.server.main": {*SERVER_BELOW, "okapikv.server", "okapikv.server.app"},
}
_LIBRARY = set(LAYERS)
LAYERS["okapikv.fuzz"] = set(_LIBRARY)  # the course fuzzer: processes, clients, checkers
LAYERS["okapikv.bench"] = set(_LIBRARY)  # benchmarks: clusters, clients, load processes
LAYERS["okapikv.cli"] = set(LAYERS) - {"okapikv.cli"}  # the ``okapi`` command: everything
LAYERS["okapikv.__main__"] = {"okapikv.cli"}

# Arrows that break the rules on this branch and are being removed by the other steps of the same
# restructuring, each on its own branch. The coordinator deletes each line when that branch lands
# (``test_every_allowance_is_still_needed`` fails once one is no longer needed).
ALLOWED_ARROWS: set[tuple[str, str]] = {
    # storage/ -> server/: the timestamp epoch belongs beside the timestamp encoding in core
    # (okapikv.core.timestamps); server/clock.py and core/ are the house-server and house-core areas.
    ("okapikv.storage.integrity", "okapikv.server.clock"),
}
ALLOWED_CIRCLES: set[frozenset[str]] = {
    # house-server: instruments apart from the exporter break this circle.
    frozenset({"okapikv.server.metrics", "okapikv.server.node"}),
    # house-bench: the engine apart from the suites.
    frozenset({"okapikv.bench.lean", "okapikv.bench.worker"}),
    frozenset({"okapikv.bench.fast", "okapikv.bench.resp", "okapikv.bench.scaling", "okapikv.bench.suites"}),
}


# ------------------------------------------------------------------------------------ the checker


def find_modules(src: Path) -> dict[str, Path]:
    """Every module of the ``okapikv`` package under ``src``, by dotted name."""
    modules: dict[str, Path] = {}
    for path in sorted((src / "okapikv").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _call_name(function: ast.expr) -> str | None:
    if isinstance(function, ast.Name):
        return function.id
    if isinstance(function, ast.Attribute):
        return function.attr
    return None


def imports_of(name: str, path: Path, modules: Iterable[str]) -> set[str]:
    """The modules of ``modules`` that module ``name`` imports, anywhere in its source."""
    known = set(modules)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in known:  # ``import okapikv.x.y`` of a name inside a module
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                add(submodule if submodule in known else base)
        elif isinstance(node, ast.Call) and _call_name(node.func) in ("import_module", "__import__"):
            for argument in node.args[:1]:
                if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                    add(argument.value)
    return found


def import_graph(src: Path) -> dict[str, set[str]]:
    modules = find_modules(src)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def _within(module: str, entry: str) -> bool:
    if entry == "okapikv":
        return module == entry
    return module == entry or module.startswith(entry + ".")


def entry_of(module: str, layers: Mapping[str, set[str]]) -> str | None:
    """The longest entry of ``layers`` that ``module`` belongs to (None: it belongs to none)."""
    matching = [entry for entry in layers if _within(module, entry)]
    return max(matching, key=len) if matching else None


def layer_violations(graph: Mapping[str, set[str]], layers: Mapping[str, set[str]],
                     allowed: Iterable[tuple[str, str]] = ()) -> list[str]:
    """Every arrow of ``graph`` that ``layers`` does not allow, as ``a -> b (entry A may not import B)``."""
    found = []
    allowed = set(allowed)
    for source, targets in sorted(graph.items()):
        entry = entry_of(source, layers)
        if entry is None:
            found.append(f"{source}: in no entry of the layer table")
            continue
        for target in sorted(targets):
            if _within(target, entry) or (source, target) in allowed:
                continue
            if not any(_within(target, permitted) for permitted in layers[entry]):
                found.append(f"{source} -> {target} ({entry} may not import {entry_of(target, layers)})")
    return found


def circles(graph: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def entry_graph(layers: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """The table as a graph of entries (a row naming a module points at that module's entry)."""
    return {entry: {target for permitted in allowed if (target := entry_of(permitted, layers)) not in (None, entry)}
            for entry, allowed in layers.items()}


# ------------------------------------------------------------------------------------ the tree


GRAPH = import_graph(SRC)


def test_the_walk_sees_every_package_and_every_kind_of_import() -> None:
    assert {"okapikv.core.server", "okapikv.check.history", "okapikv.fuzz.command", "okapikv.cli",
            "okapikv"} <= set(GRAPH)
    assert "okapikv.client" in GRAPH["okapikv"]  # a function-level import (``okapikv.__getattr__``)
    assert "okapikv.resp.service" in GRAPH["okapikv.server.app"]


def test_every_module_is_in_the_layer_table() -> None:
    assert [module for module in GRAPH if entry_of(module, LAYERS) is None] == []


def test_every_import_follows_the_layer_table() -> None:
    assert layer_violations(GRAPH, LAYERS, ALLOWED_ARROWS) == []


def test_the_layer_table_has_no_circle() -> None:
    assert circles(entry_graph(LAYERS)) == []


def test_no_import_circles_between_modules() -> None:
    assert [sorted(circle) for circle in circles(GRAPH) if circle not in ALLOWED_CIRCLES] == []


def test_every_allowance_is_still_needed() -> None:
    present = set(circles(GRAPH))
    stale = [" <-> ".join(sorted(circle)) for circle in ALLOWED_CIRCLES if circle not in present]
    stale += [f"{a} -> {b}" for a, b in ALLOWED_ARROWS if b not in GRAPH.get(a, set())]
    assert stale == [], "these allowances are no longer needed: delete them from test_layers.py"


def test_check_and_core_are_pure_of_processes() -> None:
    """``okapi fuzz`` starts processes and clusters: it is a package of its own, not a checker."""
    assert not any(_within(module, "okapikv.check") for module in GRAPH if "fuzz" in module)
    assert all(entry_of(target, LAYERS) in ("okapikv.check", CORE)
               for module, targets in GRAPH.items() if _within(module, "okapikv.check") for target in targets)


# ------------------------------------------------------------------------------------ the checker fails


def _tree(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize("bad", [
    "from okapikv.server.node import PartitionNode\n",
    "def later():\n    from okapikv.server import node\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import okapikv.server.node\n",
    "import importlib\nimportlib.import_module('okapikv.server.node')\n",
    "from ..server import node\n",
])
def test_a_bad_import_is_reported(tmp_path: Path, bad: str) -> None:
    src = _tree(tmp_path, {
        "okapikv/__init__.py": "",
        "okapikv/core/__init__.py": "",
        "okapikv/core/hlc.py": "X = 1\n",
        "okapikv/core/bad.py": "from okapikv.core.hlc import X\n" + bad,
        "okapikv/server/__init__.py": "",
        "okapikv/server/node.py": "from okapikv.core import hlc\nclass PartitionNode: ...\n",
    })
    layers = {"okapikv": set(), "okapikv.core": set(), "okapikv.server": {"okapikv.core"}}
    graph = import_graph(src)
    assert graph["okapikv.server.node"] == {"okapikv.core.hlc"}
    assert layer_violations(graph, layers) == [
        "okapikv.core.bad -> okapikv.server.node (okapikv.core may not import okapikv.server)"]
    assert layer_violations(graph, layers, {("okapikv.core.bad", "okapikv.server.node")}) == []


def test_a_circle_is_reported(tmp_path: Path) -> None:
    src = _tree(tmp_path, {
        "okapikv/__init__.py": "",
        "okapikv/server/__init__.py": "",
        "okapikv/server/metrics.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                     "    from okapikv.server.node import PartitionNode\n",
        "okapikv/server/node.py": "from okapikv.server.metrics import Histograms\n",
        "okapikv/server/app.py": "from okapikv.server import node, metrics\n",
    })
    graph = import_graph(src)
    assert circles(graph) == [frozenset({"okapikv.server.metrics", "okapikv.server.node"})]
    assert layer_violations(graph, {"okapikv": set(), "okapikv.server": set()}) == []


def test_a_circle_in_the_table_is_reported() -> None:
    layers = {"okapikv.a": {"okapikv.b.x"}, "okapikv.b": {"okapikv.c"}, "okapikv.c": {"okapikv.a"}}
    assert circles(entry_graph(layers)) == [frozenset({"okapikv.a", "okapikv.b", "okapikv.c"})]


def test_a_module_outside_the_table_is_reported() -> None:
    assert layer_violations({"okapikv.new.thing": set()}, LAYERS) == [
        "okapikv.new.thing: in no entry of the layer table"]
