"""The core is pure (docs/design.md, "A pure core, two drivers"): no I/O, no clock, no randomness.

Every module of ``okapikv.core`` is parsed and its imports checked, including imports nested in
functions and ``if TYPE_CHECKING`` blocks; then ``okapikv.core.server`` (which pulls in the whole
core) is imported in a fresh interpreter and the forbidden modules must not have been loaded by it.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from import_graph import call_name

import okapikv.core

FORBIDDEN = ("grpc", "asyncio", "time", "random", "socket", "threading")


def core_modules() -> list[tuple[str, Path]]:
    root = Path(okapikv.core.__file__).parent
    modules = [("okapikv.core", root / "__init__.py")]
    for info in pkgutil.walk_packages([str(root)], prefix="okapikv.core."):
        spec_path = root.joinpath(*info.name.split(".")[2:])
        path = spec_path / "__init__.py" if info.ispkg else spec_path.with_suffix(".py")
        modules.append((info.name, path))
    return modules


def imported_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Call) and call_name(node.func) in ("__import__", "import_module"):
            names.update(arg.value for arg in node.args[:1]
                         if isinstance(arg, ast.Constant) and isinstance(arg.value, str))
    return names


def is_forbidden(name: str) -> bool:
    top = str(name).split(".")[0]
    return top in FORBIDDEN


def test_walk_finds_every_core_module() -> None:
    names = {name for name, _ in core_modules()}
    assert {
        "okapikv.core.server",
        "okapikv.core.state",
        "okapikv.core.stabilization",
        "okapikv.core.reads",
        "okapikv.core.catchup",
        "okapikv.core.gc",
        "okapikv.core.timestamps",
        "okapikv.core.mvstore",
        "okapikv.core.protocols.okapi",
        "okapikv.core.protocols.cure",
        "okapikv.core.protocols.gentlerain",
        "okapikv.core.protocols.eventual",
        "okapikv.core.protocols.base",
    } <= names
    assert all(path.is_file() for _, path in core_modules())


@pytest.mark.parametrize(("name", "path"), core_modules(), ids=[name for name, _ in core_modules()])
def test_module_imports_nothing_impure(name: str, path: Path) -> None:
    bad = sorted(imported for imported in imported_names(path) if is_forbidden(imported))
    assert bad == [], f"{name} imports {bad}"


@pytest.mark.parametrize(("name", "path"), core_modules(), ids=[name for name, _ in core_modules()])
def test_module_imports_only_the_core_or_allowed_libraries(name: str, path: Path) -> None:
    # Inside okapikv only the core itself: never the server, client, sim, storage ... packages.
    outside = sorted(
        imported
        for imported in imported_names(path)
        if imported.split(".")[0] == "okapikv" and not imported.startswith("okapikv.core")
    )
    assert outside == [], f"{name} imports {outside}"


def test_importing_the_server_loads_no_impure_module() -> None:
    code = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import okapikv.core.server, okapikv.core.session, okapikv.core.protocols\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(result.stdout)
    assert "okapikv.core.server" in loaded
    bad = sorted(module for module in loaded if is_forbidden(module))
    assert bad == [], f"importing the core loaded {bad}"


def test_ast_checker_catches_forbidden_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\nfrom time import monotonic\ndef f():\n    import asyncio.events\n"
        "    __import__('random')\nimport importlib\nimportlib.import_module('socket')\n"
    )
    assert sorted(n for n in imported_names(sample) if is_forbidden(n)) == [
        "asyncio.events",
        "random",
        "socket",
        "time",
    ]
