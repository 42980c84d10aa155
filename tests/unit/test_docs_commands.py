"""Every `okapi` command the documentation shows is one the command accepts: a user who copies a
line from README.md or a recipe of docs/ gets no "unrecognized arguments" or "invalid choice".

Two kinds of text are read: the command lines of code blocks (a ``$ `` prompt stripped, ``\\``
continuations joined, cut at shell operators and comments), parsed whole by ``okapi``'s own parser;
and the ``okapi ...`` code spans of the prose, usage summaries with placeholders
(``[--dcs NAMES]``, ``compose|k8s``), whose every flag must be one of that command's flags and whose
``--flag a|b`` alternatives must be choices the flag takes. The end-to-end side (the commands run,
their output compared) is tests/e2e/test_e2e_docs.py.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from okapikv.cli import build_parser, subcommand_parsers

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ["README.md", *(f"docs/{name}.md" for name in
                            ("operations", "deploy", "config", "resp", "storage", "testing", "design"))]
#: Words that put a command in front of another one: `docker compose exec S okapi ...`.
EXEC = re.compile(r"^(?:(?:\w+=\S+ )+|.*\bexec (?:-T )?\S+ (?:-- )?|/usr/bin/time -f %e )?(?:\S*/)?okapi (?=[a-z])")
#: A placeholder a usage line puts where a value goes (``--partition P``), or a unit file's variable
#: (``--partition ${OKAPI_PARTITION}``).
PLACEHOLDER = re.compile(r"invalid (?:int|float) value: '(?:[A-Z]+|\$\{[A-Z_]+\})'")


def _code_lines(text: str) -> list[str]:
    """The lines of the document's fenced code blocks, continuations joined; in a block that shows
    ``$ `` prompts only the prompted lines (the rest is output)."""
    lines: list[str] = []
    block: list[str] | None = None
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if block is not None:
                prompted = [item[2:] for item in block if item.startswith("$ ")]
                lines += prompted if prompted else block
                block = None
            else:
                block = []
        elif block is not None:
            if block and block[-1].endswith("\\"):
                block[-1] = block[-1][:-1].rstrip() + " " + line.strip()
            else:
                block.append(line.strip())
    return lines


def block_commands(text: str) -> list[str]:
    """The `okapi` command lines of the code blocks, from ``okapi`` to the first shell operator."""
    commands = []
    for line in _code_lines(text):
        for part in re.split(r"\s(?:&&|\|\||;|\|)\s", line):
            part = re.split(r"\s+#|\s(?:<<<|<|>|2>)", part)[0].strip()
            match = EXEC.match(part)
            if match and not re.match(r"^okapi [\w ]+:", part[match.start():]):  # not a line of output
                commands.append("okapi " + part[match.end():])
    return commands


def span_commands(text: str) -> list[str]:
    """The ``okapi ...`` code spans of the prose, line breaks undone (and a table's ``\\|`` read as ``|``)."""
    flat = re.sub(r"\s*\n\s*", " ", text).replace("\\|", "|")
    return ["okapi " + span for span in re.findall(r"`okapi ([a-z][^`]*)`", flat)]


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Every option of a command and of its own subcommands (`okapi dc remove`), by flag."""
    found: dict[str, argparse.Action] = {}
    for action in parser._actions:
        found.update(dict.fromkeys(action.option_strings, action))
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found.update(_actions(child))
    return found


def _parse_error(argv: list[str]) -> str | None:
    """None when ``okapi ARGV`` parses, else the parser's last line."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            _, unknown = build_parser().parse_known_args(argv)
    except SystemExit as stop:
        return None if stop.code == 0 else errors.getvalue().strip().splitlines()[-1]
    return f"unrecognized arguments: {unknown}" if unknown else None


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_okapi_command_of_a_code_block_parses(document: str) -> None:
    broken = []
    for command in block_commands((ROOT / document).read_text(encoding="utf-8")):
        error = _parse_error(shlex.split(command)[1:])
        if error is not None and not PLACEHOLDER.search(error):
            broken.append(f"{command!r}: {error}")
    assert broken == [], f"{document}: commands okapi refuses"


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_flag_and_choice_of_a_usage_span_exists(document: str) -> None:
    commands = subcommand_parsers(build_parser())
    broken = []
    for span in span_commands((ROOT / document).read_text(encoding="utf-8")):
        name = span.split()[1]
        if name not in commands:
            broken.append(f"{span!r}: no command {name!r}")
            continue
        actions = _actions(commands[name])
        for flag, value in re.findall(r"(?<![\w-])(--[a-z][\w-]*)(?:[ =]([\w.-]+(?:\|[\w.-]+)+))?", span):
            if flag not in actions:
                broken.append(f"{span!r}: {flag} is not a flag of okapi {name}")
                continue
            choices = list(actions[flag].choices or ())
            if value and choices:
                broken += [f"{span!r}: {flag} takes no {item!r}" for item in value.split("|") if item not in choices]
    assert broken == [], f"{document}: usage lines that okapi does not take"


def test_the_extraction_finds_the_readme_commands_and_catches_a_wrong_flag() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "okapi up" in block_commands(readme)
    assert any(span.startswith("okapi server --config FILE") for span in span_commands(readme))
    text = "```\n$ okapi dc remove c\nokapi dc remove c: membership epoch 0 -> 1\n$ okapi up --wan-ms 5 \\\n" \
           "    --no-such-flag # why\n```\n"
    assert block_commands(text) == ["okapi dc remove c", "okapi up --wan-ms 5 --no-such-flag"]
    assert _parse_error(["up", "--wan-ms", "5", "--no-such-flag"]) is not None
    assert _parse_error(["up", "--wan-ms", "5"]) is None
    assert block_commands("```\nOKAPI_DC=a docker compose exec -T s okapi status --json | head\n```") == \
        ["okapi status --json"]


#: The commands an operator runs, whose `--help` is their reference: each flag with a default says it.
OPERATOR_COMMANDS = ("up", "server", "health", "deploy", "client", "load", "status", "fuzz", "calibrate", "dc")


def test_every_default_of_an_operator_command_is_in_its_help() -> None:
    commands = subcommand_parsers(build_parser())
    silent = []
    for name in OPERATOR_COMMANDS:
        for flag, action in _actions(commands[name]).items():
            if action.default in (None, False, True, argparse.SUPPRESS) or not flag.startswith("--"):
                continue  # no value to state (a switch, or a default decided elsewhere, which its help says)
            if "default" not in (action.help or "") and "paper:" not in (action.help or ""):
                silent.append(f"okapi {name} {flag} (default {action.default!r})")
    assert silent == [], "flags whose --help hides their default"
