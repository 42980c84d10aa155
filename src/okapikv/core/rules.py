"""``RuleBroken``: a move of the HLC, of a version vector entry or of the stable vector that breaks its
rule (``okapikv.core.clock``'s module docstring states the rules): a bug in the core, so an
``AssertionError``.

It has a module of its own because it stays a Python class in the compiled build: mypyc cannot
compile a subclass of ``AssertionError``, and ``scripts/build_compiled.py`` leaves this module out.
"""

from __future__ import annotations


class RuleBroken(AssertionError):
    """A move that breaks its rule; the holder changed nothing (``okapikv.core.clock``)."""
