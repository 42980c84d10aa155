"""README.md and the recipes of docs/ run as a user reads them: their examples are taken from the
documents themselves, run against a real `okapi up` cluster (the README's first command, with only
its base port drawn), and their output compared with what the documents show.

- README, "Using it": the `okapi client` session (what follows ``okapi> `` typed, the lines after it
  the output), the piped example, and the escaped value (``GET k two\\x0alines``);
- README, "The client library": the example block, each ``# -> value`` comment that is a Python
  literal compared with what the call returns;
- README, "The Redis protocol": `okapi up` prints the RESP port the README names, ``redis-cli -p
  PORT SET k v``, and every single-word command of the refused table answers ``-ERR <command> is
  not supported: ...``; docs/resp.md's "Connecting" example, its ports mapped to the same servers;
- docs/operations.md: `okapi load` prints ``loaded N record(s) in S s (R/s)``, `okapi status` and
  `okapi health` answer as documented, and `okapi up --print-config` is a config a server loads.

tests/unit/test_docs_commands.py checks, without a cluster, that every documented command parses.
"""

from __future__ import annotations

import ast
import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from okapi_processes import Cluster

import okapikv
from okapikv.cluster.config import ClusterConfig

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: The README's `okapi up`: its defaults, whose first port the documents show as 7100.
DCS = ("oregon", "virginia", "ireland")
PARTITIONS = 2
DOCUMENTED_BASE_PORT = 7100
REPLICATION_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    running = Cluster(tmp_path_factory.mktemp("okapi-home"), DCS, PARTITIONS)
    try:
        running.start()
        yield running
    finally:
        running.stop()


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n#", start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def code_blocks(text: str) -> list[str]:
    return re.findall(r"```[a-z]*\n(.*?)```", text, re.S)


def okapi(cluster: Cluster, *arguments: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "okapikv.cli", *arguments], input=stdin, capture_output=True,
                          text=True, env=cluster.env, timeout=60, check=False)


def resp_ports(cluster: Cluster) -> dict[tuple[str, int], int]:
    """(dc, partition) -> the RESP port `okapi up` printed next to the server."""
    pattern = re.compile(r"okapi: (\S+)\s+partition (\d+)\s+\S+\s+resp 127\.0\.0\.1:(\d+)")
    found = (pattern.match(line) for line in cluster.output)
    return {(match[1], int(match[2])): int(match[3]) for match in found if match}


def send(connection: redis.Redis, command: str) -> object:
    """The reply as redis-cli shows it: redis-py turns ``+OK`` into True."""
    reply = connection.execute_command(*command.split())
    return b"OK" if reply is True else reply


def test_the_readme_client_session_prints_what_the_readme_shows(cluster: Cluster) -> None:
    block = next(block for block in code_blocks(section(README, heading="## Using it")) if "okapi> " in block)
    typed, expected = [], []
    for line in block.splitlines():
        if line.startswith("okapi> "):
            typed.append(line.removeprefix("okapi> "))
        elif typed:  # the lines before the first prompt are the command and the terminal's banner
            expected.append(line)
    assert typed and expected
    run = okapi(cluster, "client", stdin="\n".join([*typed, "STOP"]) + "\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [*expected, "STOP"]

    piped = re.search(r"\(`printf '([^']*)' \| okapi client`\)", README)
    assert piped is not None
    commands = piped[1].replace("\\n", "\n")
    run = okapi(cluster, "client", stdin=commands)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["GET alice 1", "STOP"]  # alice as the session above wrote it


def test_on_a_terminal_the_client_greets_and_prompts_as_the_readme_shows(cluster: Cluster) -> None:
    block = next(block for block in code_blocks(section(README, heading="## Using it")) if "okapi> " in block)
    banner = block.splitlines()[1]
    assert banner.startswith("okapi: DC ")
    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "okapikv.cli", "client"], stdin=terminal, stdout=terminal,
                               stderr=terminal, env=cluster.env, start_new_session=True)
    os.close(terminal)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"okapi> " not in seen and time.monotonic() < deadline:
            if select.select([controller], [], [], 1)[0]:
                try:
                    seen += os.read(controller, 4096)
                except OSError:  # the client exited: the terminal is gone
                    break
    finally:
        process.kill()
        process.wait(timeout=10)
        os.close(controller)
    lines = seen.decode(errors="replace").replace("\r", "").splitlines()
    assert banner in lines and any(line.startswith("okapi> ") for line in lines), lines


def test_a_value_written_through_the_library_prints_escaped_as_the_readme_says(cluster: Cluster) -> None:
    example = re.search(r'`GET\s+k` of `b"two\\nlines"` prints `(GET k \S+)`', README)
    assert example is not None
    with okapikv.Client(cluster.address("oregon")) as kv:
        kv.put("k", b"two\nlines")
    run = okapi(cluster, "client", stdin="GET k\nSTOP\n")
    assert run.stdout.splitlines()[0] == example[1]


def test_the_readme_library_example_returns_what_its_comments_say(cluster: Cluster) -> None:
    block = code_blocks(section(README, heading="### The client library"))[0]
    address = re.search(r'okapikv\.Client\("([^"]+)"\)', block)
    assert address is not None and address[1] == f"127.0.0.1:{DOCUMENTED_BASE_PORT}"
    compared = 0
    with okapikv.Client(cluster.address("oregon")) as kv:
        for line in block.splitlines():
            call = re.match(r"\s+(kv\.\S.*?)\s+# -> (.*)", line)
            if call is None:
                continue
            result = eval(call[1], {"kv": kv})  # the README's own line
            try:
                documented = ast.literal_eval(call[2].split(" (")[0].strip())
            except (ValueError, SyntaxError):
                continue  # a description, not a value
            assert result == documented, line
            compared += 1
    assert compared >= 3


def test_the_readme_resp_port_and_its_refusals(cluster: Cluster) -> None:
    section_text = section(README, heading="### The Redis protocol")
    shown = re.search(r"`resp 127\.0\.0\.1:(\d+)`", section_text)
    assert shown is not None
    port = int(shown[1]) - DOCUMENTED_BASE_PORT + cluster.base_port
    assert f"resp 127.0.0.1:{port}" in "".join(cluster.output)
    command = re.search(r"`redis-cli -p (\d+) ([^`]+)`", section_text)
    assert command is not None and int(command[1]) == int(shown[1])
    connection = redis.Redis(port=port, socket_timeout=30)
    assert send(connection, command[2]) == b"OK"

    refused = section_text[section_text.index("| refused"):]
    names = [name for row in refused.splitlines()[2:]
             for name in re.findall(r"(?<!inside )`([A-Z]+)`", row.split(" | ")[0])]
    assert len(names) >= 20
    for name in names:
        with pytest.raises(redis.ResponseError, match=rf"^{name}( \S+)? is not supported: "):
            connection.execute_command(name, "k", "10")


def test_the_resp_md_connecting_example(cluster: Cluster) -> None:
    resp_md = (ROOT / "docs" / "resp.md").read_text(encoding="utf-8")
    block = code_blocks(section(resp_md, heading="## Connecting"))[0]
    servers = {int(port): (dc, int(partition)) for dc, partition, port in
               re.findall(r"okapi: (\w+)\s+partition (\d+)\s+\S+\s+resp 127\.0\.0\.1:(\d+)", block)}
    ports = resp_ports(cluster)
    printed = [line.rstrip("\n") for line in cluster.output]
    for line in (line for line in block.splitlines() if line.startswith("okapi: ")):  # the same shape
        shape = re.sub(r"(?:\\ )+", r"\\s+", re.sub(r"\d+", r"\\d+", re.escape(line)))
        assert any(re.fullmatch(shape, seen) for seen in printed), (line, printed)
    steps = re.findall(r"\$ redis-cli -p (\d+) ((?:SET|GET) [^#\n]+?)\s*(?:#.*)?\n(.*)\n", block)
    assert len(steps) == 2
    for port, command, reply in steps:
        connection = redis.Redis(port=ports[servers[int(port)]], socket_timeout=30)
        expected = reply.strip('"').encode()
        deadline = time.monotonic() + REPLICATION_TIMEOUT_S  # "once the write has replicated"
        while (answer := send(connection, command)) != expected and time.monotonic() < deadline:
            time.sleep(0.05)
        assert answer == expected, command


def test_operations_load_status_health_and_the_printed_config(cluster: Cluster, tmp_path: Path) -> None:
    records = tmp_path / "records.tsv"
    records.write_bytes(b"load-1\tone\nload-2\ttwo\twith a tab\r\n\nload-3\tthree\n")
    run = okapi(cluster, "load", str(records))
    assert run.returncode == 0, run.stderr
    assert re.fullmatch(r"loaded 3 record\(s\) in [\d.]+ s \([\d,]+/s\)\n", run.stdout)
    read = okapi(cluster, "client", stdin="GET load-2\nSTOP\n")
    assert read.stdout.startswith("GET load-2 two\\x09with\\x20a\\x20tab\n")

    status = okapi(cluster, "status")
    assert status.returncode == 0, status.stderr
    assert "membership epoch 0: oregon member, virginia member, ireland member" in status.stdout
    health = okapi(cluster, "health", "--connect", cluster.address("virginia", 1))
    assert (health.returncode, health.stdout) == (0, f"{cluster.address('virginia', 1)} serving\n")

    printed = okapi(cluster, "up", "--print-config")
    assert printed.returncode == 0, printed.stderr
    (tmp_path / "cluster.toml").write_text(printed.stdout)
    config = ClusterConfig.load(tmp_path / "cluster.toml")
    assert (list(config.dcs), config.partitions, config.protocol) == (list(DCS), PARTITIONS, "okapi")
    assert config.server("oregon", 0).address == f"127.0.0.1:{DOCUMENTED_BASE_PORT}"
