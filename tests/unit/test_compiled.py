"""``okapikv.compiled``: which modules run compiled (the opt-in mypyc build), in either build."""

from __future__ import annotations

import importlib
from importlib.machinery import EXTENSION_SUFFIXES

from okapikv import compiled


def test_an_extension_for_this_interpreter_names_its_module_and_another_abi_names_none() -> None:
    suffix = EXTENSION_SUFFIXES[0]
    assert compiled._module_name(f"okapikv/core/clock{suffix}") == "okapikv.core.clock"
    assert compiled._module_name(f"okapikv/core/__init__{suffix}") == "okapikv.core"
    assert compiled._module_name("okapikv/core/clock.cpython-30-x86_64-linux-gnu.so.py") is None
    assert compiled._module_name("okapikv/core/clock.py") is None


def test_describe_says_pure_python_or_how_many_modules_run_compiled() -> None:
    assert compiled.describe([]) == "pure Python"
    assert compiled.describe(["okapikv.core", "okapikv.core.clock", "okapikv.server.native"]) == (
        "compiled (mypyc): 3 modules")
    assert compiled.describe(["okapikv.core.clock"]) == "compiled (mypyc): 1 module"


def test_what_is_available_is_what_imports_compiled_and_what_is_loaded_is_available() -> None:
    """True in the pure build (nothing compiled) and in the compiled one (docs/operations.md)."""
    available = compiled.available()
    for name in available:
        module = importlib.import_module(name)
        assert (module.__file__ or "").endswith(tuple(EXTENSION_SUFFIXES)), name
    assert set(compiled.loaded()) <= set(available)
    assert compiled.build() == compiled.describe(available)
