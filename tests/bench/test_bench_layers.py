"""The benchmark's layers: the installed engine (``okapikv.bench``) knows nothing of the lab (the
repository's ``benchmarks/``), the lab's harness knows no suite, no module of either is in an import
circle, the installed part stays small, and the servers and clients run without the ``bench`` extra
(matplotlib, hdrhistogram), which `okapi bench` asks for in one line when it is missing.

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

import benchmarks
import okapikv
import okapikv.bench

ROOT = Path(__file__).resolve().parents[2]
BENCH = Path(okapikv.bench.__file__).parent
LAB = Path(benchmarks.__file__).parent
#: The most lines the installed engine may have (every ``*.py`` of ``okapikv.bench``): what is
#: measured and judged belongs to the lab, which a server install does not carry.
INSTALLED_LINES = 3_500
#: Every package a server, a client or `okapi up` imports; none may load the bench extra.
RUNTIME_PACKAGES = ("core", "wire", "storage", "server", "cluster", "client", "resp")
EXTRA = ("matplotlib", "hdrh")


def bench_modules() -> dict[str, Path]:
    found = {"okapikv.bench": BENCH / "__init__.py", "benchmarks": LAB / "__init__.py"}
    for root, prefix in ((BENCH, "okapikv.bench."), (LAB, "benchmarks.")):
        for info in pkgutil.walk_packages([str(root)], prefix=prefix):
            path = root.joinpath(*info.name.split(".")[prefix.count("."):])
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
    assert {"benchmarks.harness.harness", "okapikv.bench.engine.worker", "okapikv.bench.engine.lean",
            "benchmarks.suites.fast", "benchmarks.suites.acceptance", "benchmarks.cli"} <= set(MODULES)
    assert "okapikv.bench.engine.recording" in GRAPH["okapikv.bench.engine.lean"]
    assert "okapikv.bench.engine.results" in GRAPH["benchmarks.harness.harness"]


@pytest.mark.parametrize("name", sorted(name for name in MODULES if name.startswith("okapikv.bench")))
def test_the_installed_engine_imports_nothing_of_the_lab(name: str) -> None:
    upward = sorted(target for target in GRAPH[name] if target.startswith("benchmarks"))
    assert upward == [], f"{name} imports {upward}"


@pytest.mark.parametrize("name", sorted(name for name in MODULES if name.startswith("benchmarks.harness")))
def test_the_harness_imports_no_suite_and_not_the_command(name: str) -> None:
    upward = sorted(target for target in GRAPH[name]
                    if target.startswith("benchmarks.suites") or target == "benchmarks.cli")
    assert upward == [], f"{name} imports {upward}"


def test_no_installed_module_imports_the_lab() -> None:
    """The ``okapi`` command reaches the lab only through ``okapikv.bench.lab`` (by a name it builds),
    so an installed okapikv imports nothing that a wheel does not carry."""
    found = []
    for path in sorted(Path(okapikv.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}: {name}" for name in names if name.split(".")[0] == "benchmarks"]
    assert found == []


def test_the_installed_engine_is_small() -> None:
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in BENCH.rglob("*.py"))
    assert lines < INSTALLED_LINES, f"okapikv.bench has {lines} lines: move what a suite needs to benchmarks/"


def test_the_lab_is_not_installed() -> None:
    """setuptools finds packages under src/ only, so benchmarks/ stays out of a wheel."""
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert found["where"] == ["src"] and not (ROOT / "src" / "benchmarks").exists()
    assert LAB == ROOT / "benchmarks"


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


@pytest.mark.parametrize("argv", [["bench", "--quick", "--no-progress"], ["calibrate"],
                                  ["sim", "--experiment", "fig3"]])
def test_the_lab_commands_outside_a_checkout_say_how_to_get_the_lab(tmp_path: Path, argv: list[str]) -> None:
    """An installed okapikv (a copy of the package, no benchmarks/ beside it or in the working
    directory) runs the rest of the ``okapi`` command, and the lab's commands say in one line where
    the lab is, writing nothing."""
    import shutil

    site = tmp_path / "site"
    shutil.copytree(Path(okapikv.__file__).parent, site / "okapikv", ignore=shutil.ignore_patterns("__pycache__"))
    work = tmp_path / "work"
    work.mkdir()
    environment = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "okapikv.cli", *argv, "--out", str(work / "out")], cwd=work,
                          env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"okapi {argv[0]}: the benchmark lab is not here: it lives in the repository's benchmarks/")
    assert "pip install -e '.[bench]'" in line
    assert list(work.iterdir()) == []
    version = subprocess.run([sys.executable, "-m", "okapikv.cli", "--version"], cwd=work, env=environment,
                             capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("okapi (okapikv)")


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
