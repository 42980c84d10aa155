"""The opt-in compiled build: mypyc compiles a chosen list of modules in place, ``--clean`` removes it.

    python scripts/build_compiled.py [--clean] [--list] [MODULE_OR_PACKAGE ...]

Each compiled module becomes an extension beside its ``.py`` (``src/okapikv/core/clock.cpython-311-
x86_64-linux-gnu.so``) plus one shared library of the whole group (``src/okapikv__mypyc.*.so``); the
import system prefers an extension to a ``.py`` of the same name, so the checkout's code runs compiled
with no other change, and the ``.py`` stays the fallback: an extension built for another interpreter
has another ABI tag in its name and is never loaded. The default install, ``pip install -e .`` and CI
never run this (no compiler needed, the build backend untouched); the ``.so`` files are gitignored.
``okapi version`` and each server's startup log say which modules run compiled
(``okapikv.compiled``). What it compiles and why, and the test run of the compiled build:
docs/operations.md, "The compiled build"; the figures that chose the list: docs/benchmarks.md.

With no module named it compiles ``MODULES``; a name ending in ``.*`` is every module of that package
(``okapikv.core.*``). Needs the ``compiled`` extra (``pip install -e '.[compiled]'``) and a C compiler.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
#: mypyc's generated C (removed after each build and by ``--clean``)
GENERATED = ROOT / "build" / "mypyc"

# Chosen by paired measurement (docs/benchmarks.md, "The compiled build (mypyc)"): the protocol core
# and the server's per-operation path on the native port.
MODULES: tuple[str, ...] = ("okapikv.core.*", "okapikv.server.node", "okapikv.server.pipeline",
                            "okapikv.server.native", "okapikv.server.instruments")
# Modules that stay Python in every build: classes mypyc cannot compile (a subclass of AssertionError;
# ``Version``, subclassed at run time); the messages, which ``message`` makes msgspec structs at import
# (built in C already; a compiled ``message`` cannot carry ``dataclass_transform``); and the counters'
# and expiries' functions, off the path of plain values, which the checkers' tests replace to break
# them (``tests/sim/test_crdt.py``: a compiled caller would not see the replacement).
INTERPRETED: frozenset[str] = frozenset({"src/okapikv/core/rules.py", "src/okapikv/core/version.py",
                                         "src/okapikv/core/messages.py", "src/okapikv/core/counters.py",
                                         "src/okapikv/core/expiry.py"})


def _paths(names: list[str]) -> list[str]:
    """The source files (relative to the repository root) of ``names``; a clear error for a name that is none."""
    paths: list[str] = []
    for name in names:
        package = name.endswith(".*")
        base = SRC.joinpath(*name.removesuffix(".*").split("."))
        if package:
            if not (base / "__init__.py").is_file():
                raise SystemExit(f"build_compiled: {name}: no package {base.relative_to(ROOT)}")
            files = sorted(base.rglob("*.py"))
        else:
            if not base.with_suffix(".py").is_file():
                raise SystemExit(f"build_compiled: {name}: no module {base.relative_to(ROOT)}.py")
            files = [base.with_suffix(".py")]
        paths += [str(path.relative_to(ROOT)) for path in files if path.name != "__main__.py"
                  and str(path.relative_to(ROOT)) not in INTERPRETED]
    return sorted(dict.fromkeys(paths))


def built() -> list[Path]:
    """Every extension module under ``src`` (what ``--clean`` removes): okapikv has no other."""
    return sorted(path for pattern in ("*.so", "*.pyd") for path in SRC.rglob(pattern))


def clean_generated() -> None:
    """Remove mypyc's generated C, and the build folder when nothing else is in it."""
    shutil.rmtree(GENERATED, ignore_errors=True)
    if GENERATED.parent.is_dir() and not any(GENERATED.parent.iterdir()):
        GENERATED.parent.rmdir()


def clean() -> int:
    """Remove the compiled build: the extensions and mypyc's build folder; the ``.py`` files are the build again."""
    for path in built():
        path.unlink()
        print(f"removed {path.relative_to(ROOT)}")
    clean_generated()
    return 0


def build(names: list[str]) -> int:
    """Compile ``names`` in place (the whole group type-checked by mypy with the repository's strict config)."""
    try:
        from mypyc.build import mypycify
        from setuptools import setup
    except ImportError:
        raise SystemExit("build_compiled: needs mypyc and setuptools: pip install -e '.[compiled]'") from None
    paths = _paths(names)
    clean()  # a module dropped from the list must not stay compiled
    os.chdir(ROOT)  # mypy reads pyproject.toml's [tool.mypy] from here; the paths are relative to it
    with tempfile.TemporaryDirectory(prefix="okapikv-mypyc-") as temp:
        extensions = mypycify(paths, opt_level="3", group_name="okapikv", target_dir=str(GENERATED))
        os.chdir(temp)  # setuptools would read the project's pyproject.toml from the root; the paths are absolute
        setup(name="okapikv-compiled", package_dir={"": str(SRC)}, ext_modules=extensions, py_modules=[],
              script_args=["--quiet", "build_ext", "--inplace", "--build-temp", temp,
                           "--parallel", str(os.cpu_count() or 1)])
    os.chdir(ROOT)
    clean_generated()
    print(f"compiled {len(paths)} modules (`okapi --version` counts them); undo: scripts/build_compiled.py --clean")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("modules", nargs="*", help="modules or packages (okapikv.core.*); default: the chosen list")
    parser.add_argument("--clean", action="store_true", help="remove every compiled module")
    parser.add_argument("--list", action="store_true", help="print the source files it would compile")
    args = parser.parse_args()
    if args.clean:
        return clean()
    names = args.modules or list(MODULES)
    if args.list:
        print("\n".join(_paths(names)))
        return 0
    return build(names)


if __name__ == "__main__":
    sys.exit(main())
