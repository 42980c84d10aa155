"""The benchmark's layers: the engine knows no suite, no module of ``okapikv.bench`` is in an import
circle, and the servers and clients run without the ``bench`` extra (matplotlib, hdrhistogram),
which `okapi bench` asks for in one line when it is missing.

Imports are read from the source (every ``import``, also inside functions and ``TYPE_CHECKING``
blocks), so a lazy import cannot hide a circle.
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import okapikv
import okapikv.bench

ROOT = Path(__file__).resolve().parents[2]
BENCH = Path(okapikv.bench.__file__).parent
#: Every package a server, a client or `okapi up` imports; none may load the bench extra.
RUNTIME_PACKAGES = ("core", "wire", "storage", "server", "cluster", "client", "resp")
EXTRA = ("matplotlib", "hdrh")


def bench_modules() -> dict[str, Path]:
    found = {"okapikv.bench": BENCH / "__init__.py"}
    for info in pkgutil.walk_packages([str(BENCH)], prefix="okapikv.bench."):
        path = BENCH.joinpath(*info.name.split(".")[2:])
        found[info.name] = path / "__init__.py" if info.ispkg else path.with_suffix(".py")
    return found


MODULES = bench_modules()


def imports_of(path: Path) -> set[str]:
    """The okapikv.bench modules ``path`` imports (``from package import module`` names the module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle of ``graph`` (module -> modules it imports), each once, by depth-first search."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                found.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


GRAPH = {name: imports_of(path) - {name} for name, path in MODULES.items()}


def test_the_walk_finds_the_engine_and_the_suites() -> None:
    assert {"okapikv.bench.engine.harness", "okapikv.bench.engine.worker", "okapikv.bench.engine.lean",
            "okapikv.bench.suites.fast", "okapikv.bench.suites.acceptance", "okapikv.bench.cli"} <= set(MODULES)
    assert "okapikv.bench.engine.recording" in GRAPH["okapikv.bench.engine.lean"]


@pytest.mark.parametrize("name", sorted(name for name in MODULES if name.startswith("okapikv.bench.engine")))
def test_the_engine_imports_no_suite_and_not_the_command(name: str) -> None:
    upward = sorted(target for target in GRAPH[name]
                    if target.startswith("okapikv.bench.suites") or target == "okapikv.bench.cli")
    assert upward == [], f"{name} imports {upward}"


def test_no_module_of_the_benchmark_is_in_an_import_circle() -> None:
    assert cycles(GRAPH) == []


def test_the_circle_finder_finds_a_circle() -> None:
    """What the test above would say of the circles the benchmark had (worker <-> lean)."""
    assert cycles({"worker": {"lean", "recording"}, "lean": {"worker"}, "recording": set()}) == [
        ["lean", "worker", "lean"]]
    assert cycles({"suites": {"fast"}, "fast": {"scaling"}, "scaling": {"suites"}}) == [
        ["fast", "scaling", "suites", "fast"]]


def test_the_servers_and_clients_do_not_load_the_bench_extra() -> None:
    """What `pip install .` then `okapi up` imports: every module of those packages, and the command."""
    modules = ["okapikv.cli"]
    for package in RUNTIME_PACKAGES:
        root = Path(okapikv.__file__).parent / package
        modules.append(f"okapikv.{package}")
        modules += [info.name for info in pkgutil.walk_packages([str(root)], prefix=f"okapikv.{package}.")]
    script = ("import importlib, sys\n"
              f"for name in {modules!r}:\n    importlib.import_module(name)\n"
              f"print(sorted(name for name in {EXTRA!r} if name in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_okapi_bench_without_the_extra_says_what_to_install_in_one_line(tmp_path: Path) -> None:
    script = ("import sys\n"
              f"for name in {EXTRA!r}:\n    sys.modules[name] = None  # as if not installed\n"
              "from okapikv.cli import main\n"
              f"sys.exit(main(['bench', '--quick', '--no-progress', '--out', {str(tmp_path / 'out')!r}]))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("okapi bench: the bench extra is not installed (no matplotlib, hdrh)")
    assert "pip install '.[bench]'" in line
    assert not (tmp_path / "out").exists()


def test_the_bench_extra_holds_what_only_the_benchmark_needs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(requirements: list[str]) -> set[str]:
        return {requirement.split(">")[0].split("=")[0].split(";")[0].strip() for requirement in requirements}

    extras = project["optional-dependencies"]
    assert not {"matplotlib", "hdrhistogram"} & names(project["dependencies"])
    assert {"matplotlib", "hdrhistogram", "redis"} <= names(extras["bench"])
    assert {"matplotlib", "hdrhistogram"} <= names(extras["test"])  # the README's test command runs tests/bench
