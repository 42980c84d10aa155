"""``scripts/build_compiled.py``: the opt-in compiled build's module list, its errors, and (slow) a real
build in a copy of the checkout, loaded, counted by ``okapi --version`` and removed by ``--clean``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from scripts_support import load_script

ROOT = Path(__file__).resolve().parents[2]


def _script(root: Path = ROOT) -> ModuleType:
    return load_script("build_compiled", root)


def test_the_chosen_list_is_the_core_and_the_servers_path_less_what_stays_python() -> None:
    script = _script()
    paths = script._paths(list(script.MODULES))
    assert "src/okapikv/core/server.py" in paths and "src/okapikv/core/protocols/okapi.py" in paths
    assert "src/okapikv/server/native.py" in paths and "src/okapikv/server/node.py" in paths
    assert not {f"src/okapikv/core/{name}.py" for name in ("rules", "version", "messages", "counters", "expiry")} & set(
        paths)
    assert all(path.endswith(".py") and (ROOT / path).is_file() for path in paths)
    assert script._paths(["okapikv.core.clock", "okapikv.core.clock"]) == ["src/okapikv/core/clock.py"]


@pytest.mark.parametrize("name", ["okapikv.no_such_module", "okapikv.no_such_package.*", "okapikv.cli.*"])
def test_a_name_that_is_no_module_or_package_is_refused_in_one_line(name: str) -> None:
    with pytest.raises(SystemExit, match=rf"^build_compiled: {name.replace('.', '[.]').replace('*', '[*]')}: no "):
        _script()._paths([name])


@pytest.mark.slow
def test_a_module_built_in_place_is_loaded_counted_and_removed_by_clean(tmp_path: Path) -> None:
    pytest.importorskip("mypyc")
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the compiled build needs one (the default install does not)")
    for name in ("src", "scripts", "pyproject.toml"):  # a copy: the build writes beside the sources
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
        else:
            shutil.copy(source, tmp_path / name)
    environment = {**os.environ, "PYTHONPATH": str(tmp_path / "src")}

    def run(*arguments: str) -> str:
        done = subprocess.run([sys.executable, *arguments], cwd=tmp_path, env=environment, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    run("scripts/build_compiled.py", "okapikv.core.vectors")
    assert run("-c", "import okapikv.core.vectors as m; print(m.__file__)").strip().endswith(".so")
    assert run("-m", "okapikv.cli", "--version").strip().endswith(", compiled (mypyc): 1 module")
    run("scripts/build_compiled.py", "--clean")
    assert not list((tmp_path / "src").rglob("*.so")) and not (tmp_path / "build").exists()
    assert run("-m", "okapikv.cli", "--version").strip().endswith(", pure Python")
