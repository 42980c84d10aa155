"""The `okapi` command's own surface: version, `python -m okapikv`, the
license, usage on a bad flag, help for every flag, and hints that only name flags that exist."""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import okapikv
from okapikv import compiled
from okapikv.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "src" / "okapikv"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")
#: Flags of other programs that okapikv's strings name: redis-server's (``bench.engine.redis_ref``) and
#: redis-benchmark's (``bench.suites.resp``).
EXTERNAL_FLAGS = {"--port", "--bind", "--save", "--appendonly", "--protected-mode", "--daemonize", "--loglevel",
                  "--csv"}
#: flags of the processes a server starts itself, not of an okapi command (okapikv.storage.checkpoint_process)
INTERNAL_FLAGS = {"--nice"}


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    """A command's flags, its own subcommands' included (`okapi dc remove --force`)."""
    flags = {option for action in parser._actions for option in action.option_strings if option.startswith("--")}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            flags = flags.union(*(_flags(sub) for sub in action.choices.values()))
    return flags


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return dict(action.choices)


COMMANDS = _subcommands(build_parser())
FLAGS = {name: _flags(parser) for name, parser in COMMANDS.items()}
EVERY_FLAG = set().union(*FLAGS.values()) | _flags(build_parser())


# ------------------------------------------------------------------ version, module, license


def test_version_is_single_sourced_and_printed() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "okapikv.__version__"}
    assert metadata.version("okapikv") == okapikv.__version__
    for command in ([sys.executable, "-m", "okapikv.cli", "--version"], [sys.executable, "-m", "okapikv", "--version"]):
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"okapi (okapikv) {okapikv.__version__}, {compiled.build()}"


def test_python_dash_m_okapikv_is_the_okapi_command() -> None:
    result = subprocess.run([sys.executable, "-m", "okapikv", "sim", "--help"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("usage: okapi sim"), result.stderr


def test_the_license_file_is_the_mit_license_pyproject_names() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Copyright (c) 2026 the okapikv authors" in text
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == {"text": "MIT"}


# ------------------------------------------------------------------ usage and help


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unknown_flag_prints_the_subcommands_usage(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    required = {"check": ["history.jsonl"], "load": ["records.tsv"], "dc": ["remove", "c"], "deploy": ["compose"],
                "server": ["--config", "c.toml", "--dc", "a", "--partition", "0"]}
    arguments = [command, *required.get(command, []), "--bogus"]
    with pytest.raises(SystemExit) as exited:
        main(arguments)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: okapi {command} ")
    assert f"okapi {command}: error: unrecognized arguments: --bogus" in err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_has_one_line_of_help(command: str) -> None:
    for action in COMMANDS[command]._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        assert action.help, f"okapi {command} {action.option_strings[0]} has no help"
        if command == "bench":  # the details are in docs/benchmarks.md
            assert len(action.help) <= 110 and "\n" not in action.help, (
                f"okapi bench {action.option_strings[0]}: help longer than a line ({len(action.help)} characters)")


# ------------------------------------------------------------------ hints name flags that exist


def _strings() -> list[tuple[Path, int, str]]:
    """Every string literal of the package (f-strings by their literal parts), with where it is."""
    found: list[tuple[Path, int, str]] = []
    for path in sorted(SOURCES.rglob("*.py")):
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append((path.relative_to(ROOT), node.lineno, node.value))
    return found


def test_every_flag_a_string_names_exists() -> None:
    unknown = [f"{path}:{line}: {flag}" for path, line, text in _strings() for flag in FLAG.findall(text)
               if flag not in EVERY_FLAG | EXTERNAL_FLAGS | INTERNAL_FLAGS]
    assert not unknown, "flags no okapi command has:\n" + "\n".join(unknown)


COMMAND_SPAN = re.compile(r"\bokapi (" + "|".join(COMMANDS) + r")\b((?:(?! okapi )[^`\n;()'\"])*)")


def test_a_flag_named_after_a_command_is_that_commands() -> None:
    """In "`okapi client --wait-s SECONDS`" the flag must be `okapi client`'s, not another command's."""
    wrong = [f"{path}:{line}: okapi {command} {flag}" for path, line, text in _strings()
             for command, span in COMMAND_SPAN.findall(text) for flag in FLAG.findall(span)
             if flag not in FLAGS[command]]
    assert not wrong, "flags named after a command that does not have them:\n" + "\n".join(wrong)


@pytest.mark.parametrize("command", ["client", "status"])
def test_the_no_cluster_hint_names_the_commands_own_flags(
        command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OKAPI_HOME", str(tmp_path))
    assert main([command]) == 2
    err = capsys.readouterr().err
    assert "no local cluster config" in err
    named = FLAG.findall(err)
    assert named and set(named) <= FLAGS[command], err


def test_the_data_directory_hints_name_no_flag_of_another_command(tmp_path: Path) -> None:
    """`okapi server` reports these; `okapi up` shows them too: neither's flags fit both."""
    from okapikv.storage import DataDirError, Identity, SqliteStore

    store = SqliteStore(tmp_path, Identity("test", ("a",), 1, "okapi", "a", 0))
    store.close()
    with pytest.raises(DataDirError) as raised:
        SqliteStore(tmp_path, Identity("test", ("a",), 1, "cure", "a", 0))
    assert not FLAG.findall(str(raised.value)), raised.value


# ------------------------------------------------------------------ a lean server install


def _without_numpy(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run where numpy cannot be imported (a server install: no check or bench extra)."""
    return subprocess.run([sys.executable, "-c", "import sys; sys.modules['numpy'] = None\n" + code],
                          capture_output=True, text=True, timeout=60)


def test_a_server_install_runs_without_the_checkers_dependencies(tmp_path: Path) -> None:
    served = _without_numpy("import okapikv.serve.main, okapikv.serve.app, okapikv.cluster.health, "
                            "okapikv.cluster.launcher, okapikv.cluster.status, okapikv.client.stdio, "
                            "okapikv.deploy.command\nprint('ok')")
    assert served.returncode == 0 and served.stdout.strip() == "ok", served.stderr
    history = tmp_path / "history.jsonl"
    history.write_text("")
    checked = _without_numpy(f"from okapikv.cli import main\nsys.exit(main(['check', {str(history)!r}]))")
    assert checked.returncode == 2, checked.stderr
    assert checked.stderr.strip() == (
        "okapi check: needs numpy, which a server install leaves out: pip install 'okapikv[check]'")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(requirement.startswith("numpy") for requirement in project["dependencies"])
    assert any(requirement.startswith("numpy") for requirement in project["optional-dependencies"]["check"])
