"""The suite fails on a lint or type error: ruff over src, tests, the benchmark lab and the scripts,
mypy --strict over the package and the lab.

Both read their settings from pyproject.toml, so `pytest` (the README's test command, which CI runs)
enforces the same rules a developer runs by hand or through `.pre-commit-config.yaml`. Each runs in
a subprocess of this interpreter, so the check uses the versions the `test` extra installed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_tool(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *arguments], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_ruff_finds_nothing() -> None:
    result = run_tool("ruff", "check", "--no-cache", "src", "tests", "benchmarks", "scripts")
    assert result.returncode == 0, f"ruff check src tests benchmarks scripts:\n{result.stdout}{result.stderr}"


@pytest.mark.slow
def test_mypy_strict_finds_nothing() -> None:
    result = run_tool("mypy", "--cache-dir", str(ROOT / ".mypy_cache"))
    assert result.returncode == 0, f"mypy (strict, from pyproject.toml):\n{result.stdout}{result.stderr}"
