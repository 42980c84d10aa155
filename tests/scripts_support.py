"""Loading a script of ``scripts/`` as a module, so a test can call its functions: the scripts are
commands, not a package, and each test that checks what a script measures needs them importable."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str, root: Path = ROOT) -> ModuleType:
    """``root/scripts/name.py`` executed as a fresh module named ``name``."""
    spec = importlib.util.spec_from_file_location(name, root / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
