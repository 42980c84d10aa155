"""Which of okapikv's modules run compiled: the opt-in mypyc build (``scripts/build_compiled.py``).

The compiled build puts an extension module beside a module's ``.py``; the import system loads the
extension when its name carries this interpreter's ABI tag (``importlib.machinery.EXTENSION_SUFFIXES``)
and the ``.py`` otherwise, so one checkout can run either way and nothing else says which. A user
must be able to tell (a figure measured on a compiled server is not one of the default install):
``okapi --version`` prints ``build`` and each server logs ``loaded`` at startup (docs/operations.md,
"The compiled build").
"""

from __future__ import annotations

import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _module_name(relative: str) -> str | None:
    """``okapikv/core/clock.cpython-311-x86_64-linux-gnu.so`` -> ``okapikv.core.clock``; None for
    a file this interpreter would not load as an extension."""
    for suffix in EXTENSION_SUFFIXES:
        if relative.endswith(suffix):
            return relative[: -len(suffix)].replace("/", ".").removesuffix(".__init__")
    return None


def available() -> list[str]:
    """The modules this interpreter imports compiled: an extension for its ABI beside the source."""
    names = (_module_name(path.relative_to(_PACKAGE.parent).as_posix()) for path in _PACKAGE.rglob("*.*"))
    return sorted(name for name in names if name is not None)


def loaded() -> list[str]:
    """The okapikv modules of this process that were imported from an extension (compiled)."""
    return sorted(name for name, module in list(sys.modules.items())
                  if name.startswith("okapikv.") and _module_name(getattr(module, "__file__", None) or "") is not None)


def describe(names: list[str]) -> str:
    """A few words (``okapi --version``'s line stays short): ``pure Python`` or how many modules run compiled."""
    if not names:
        return "pure Python"
    return f"compiled (mypyc): {len(names)} module{'s' if len(names) > 1 else ''}"


def build() -> str:
    """``okapi --version``'s word on the build: what an import of okapikv here would load."""
    return describe(available())
