"""The import graph of a source tree, parsed (never imported), and the checks the layer test runs on
it (``test_layers.py``, docs/design.md, "Layers"): which imports a table of layers allows, and the
circles of a graph."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path


def find_modules(src: Path) -> dict[str, Path]:
    """Every module of the ``okapikv`` package under ``src``, by dotted name."""
    modules: dict[str, Path] = {}
    for path in sorted((src / "okapikv").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def call_name(function: ast.expr) -> str | None:
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
        elif isinstance(node, ast.Call) and call_name(node.func) in ("import_module", "__import__"):
            for argument in node.args[:1]:
                if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                    add(argument.value)
    return found


def import_graph(src: Path) -> dict[str, set[str]]:
    modules = find_modules(src)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def within(module: str, entry: str) -> bool:
    if entry == "okapikv":
        return module == entry
    return module == entry or module.startswith(entry + ".")


def entry_of(module: str, layers: Mapping[str, set[str]]) -> str | None:
    """The longest entry of ``layers`` that ``module`` belongs to (None: it belongs to none)."""
    matching = [entry for entry in layers if within(module, entry)]
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
            if within(target, entry) or (source, target) in allowed:
                continue
            if not any(within(target, permitted) for permitted in layers[entry]):
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
