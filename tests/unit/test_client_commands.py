"""The ``okapi client`` line protocol: parsing, formatting and the piped loop, without a network."""

from __future__ import annotations

import io

import pytest

from okapikv.client import commands
from okapikv.client.commands import CommandError, Delete, Get, Put, Scan, Stop, Swap, Tx, parse
from okapikv.client.stdio import respond, serve
from okapikv.errors import InvalidArgument, OkapiError, OutcomeUnknown, Unavailable


class DictClient:
    """An in-memory stand-in for ``okapikv.Client`` with the same result types."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.fail_with: Exception | None = None

    def _check(self) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    def put(self, key: str, value: str) -> bool:
        self._check()
        found = key.encode() in self.data
        self.data[key.encode()] = value.encode()
        return found

    def swap(self, key: str, value: str) -> bytes | None:
        self._check()
        old = self.data.get(key.encode())
        self.data[key.encode()] = value.encode()
        return old

    def get(self, key: str) -> bytes | None:
        self._check()
        return self.data.get(key.encode())

    def delete(self, key: str) -> bool:
        self._check()
        return self.data.pop(key.encode(), None) is not None

    def scan(self, start: str, end: str) -> list[tuple[bytes, bytes]]:
        self._check()
        return sorted((k, v) for k, v in self.data.items() if start.encode() <= k <= end.encode())

    def read_tx(self, keys: list[str]) -> list[bytes | None]:
        self._check()
        return [self.data.get(key.encode()) for key in keys]


def run_script(script: str, client: DictClient | None = None) -> str:
    output = io.StringIO()
    assert serve(client or DictClient(), io.StringIO(script), output) == 0
    return output.getvalue()


# ------------------------------------------------------------------ parsing


@pytest.mark.parametrize(("line", "command"), [
    ("PUT k v", Put("k", "v")),
    ("SWAP k v", Swap("k", "v")),
    ("GET k", Get("k")),
    ("DELETE k", Delete("k")),
    ("SCAN a z", Scan("a", "z")),
    ("TX a", Tx(("a",))),
    ("TX a b a", Tx(("a", "b", "a"))),
    ("STOP", Stop()),
    ("PUT Key1 VALUE2\n", Put("Key1", "VALUE2")),
    ("PUT k v\r\n", Put("k", "v")),
    ("  GET   k  ", Get("k")),
    ("GET\tk", Get("k")),
    ("PUT 0123456789 abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
     Put("0123456789", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")),
    # The course's YCSB driver: underscores in keys, any printable ASCII and DEL (0x7f) in values.
    ("PUT usertable_user6284781860667377211 a!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\x7f",
     Put("usertable_user6284781860667377211", "a!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\x7f")),
    ("GET k-1", Get("k-1")),
    ("TX a b$ c", Tx(("a", "b$", "c"))),
    ("SCAN user_0 user_9~", Scan("user_0", "user_9~")),
    ("GET \x7f", Get("\x7f")),
    ("PUT k v\x0b", Put("k", "v")),  # vertical tab and form feed are whitespace too
])
def test_parse_valid(line: str, command: commands.Command) -> None:
    assert parse(line) == command


@pytest.mark.parametrize("line", ["", "\n", "   \t ", "\r\n"])
def test_blank_lines_are_not_commands(line: str) -> None:
    assert parse(line) is None


@pytest.mark.parametrize(("line", "fragment"), [
    ("put k v", "unknown command 'put' (keywords are upper case)"),
    ("Get k", "unknown command 'Get'"),
    ("FROB k", "unknown command 'FROB'; expected one of PUT, SWAP, GET, DELETE, SCAN, TX, STOP"),
    ("PUT k", "PUT takes 2 arguments, got 1: PUT <key> <value>"),
    ("PUT k v w", "PUT takes 2 arguments, got 3"),
    ("SWAP k", "SWAP takes 2 arguments"),
    ("GET", "GET takes 1 argument, got 0: GET <key>"),
    ("GET a b", "GET takes 1 argument, got 2"),
    ("DELETE", "DELETE takes 1 argument"),
    ("SCAN a", "SCAN takes 2 arguments"),
    ("STOP now", "STOP takes 0 arguments, got 1"),
    ("TX", "TX needs at least one key"),
    ("GET ключ", "invalid token 'ключ'"),
    ("GET k\u00e9", "invalid token"),
    ("PUT k v\x01", "invalid token 'v\\x01': keys and values are ASCII characters 0x21-0x7f"),
    ("GET a\x1cb", "invalid token"),  # str.split() would take U+001C for whitespace
    ("GET a\x85b", "invalid token"),
    ("GET k\ufffd", "invalid token"),  # a byte that is not UTF-8, as the client decodes stdin
    ("GET " + "x" * 45 + "\x01", "..."),
])
def test_parse_errors(line: str, fragment: str) -> None:
    with pytest.raises(CommandError) as raised:
        parse(line)
    assert fragment in str(raised.value)


# ------------------------------------------------------------------ formatting


def test_formats_match_the_course_protocol() -> None:
    assert commands.format_put(Put("k", "v"), True) == ["PUT k found"]
    assert commands.format_put(Put("k", "v"), False) == ["PUT k not_found"]
    assert commands.format_swap(Swap("k", "v"), b"old") == ["SWAP k old"]
    assert commands.format_swap(Swap("k", "v"), None) == ["SWAP k null"]
    assert commands.format_get(Get("k"), b"v") == ["GET k v"]
    assert commands.format_get(Get("k"), None) == ["GET k null"]
    assert commands.format_delete(Delete("k"), True) == ["DELETE k found"]
    assert commands.format_delete(Delete("k"), False) == ["DELETE k not_found"]
    assert commands.format_scan(Scan("a", "z"), [(b"b", b"1"), (b"c", b"2")]) == [
        "SCAN a z BEGIN", "  b 1", "  c 2", "SCAN END"]
    assert commands.format_scan(Scan("a", "z"), []) == ["SCAN a z BEGIN", "SCAN END"]
    assert commands.format_tx(Tx(("a", "b")), [b"1", None]) == ["TX a b BEGIN", "  a 1", "  b null", "TX END"]


def test_write_lines_carry_a_timestamp_only_when_given_one() -> None:
    assert commands.format_put(Put("k", "v"), True, 42) == ["PUT k found ts=42"]
    assert commands.format_put(Put("k", "v"), False, 0) == ["PUT k not_found ts=0"]
    assert commands.format_swap(Swap("k", "v"), b"old", 7) == ["SWAP k old ts=7"]
    assert commands.format_swap(Swap("k", "v"), None, 2**63 + 1) == [f"SWAP k null ts={2**63 + 1}"]
    assert commands.format_delete(Delete("k"), True, 9) == ["DELETE k found ts=9"]
    assert commands.format_delete(Delete("k"), False, 9) == ["DELETE k not_found ts=9"]
    assert commands.format_put(Put("k", "v"), True, None) == ["PUT k found"]
    assert commands.format_swap(Swap("k", "v"), None, None) == ["SWAP k null"]
    assert commands.format_delete(Delete("k"), False, None) == ["DELETE k not_found"]


def test_a_token_prints_exactly_and_any_other_value_escaped_on_one_line() -> None:
    course = b"a!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\x7f"  # the YCSB driver's values: byte for byte
    assert commands.text(b"abc") == "abc" and commands.text(course) == course.decode()
    assert commands.text(b"two\nlines") == "two\\x0alines"
    assert commands.text(b"nul\x00 and space") == "nul\\x00\\x20and\\x20space"
    assert commands.text("é".encode()) == "\\xc3\\xa9"
    assert commands.text(b"\xff\\\n") == "\\xff\\\\\\x0a"  # in an escaped value, the backslash too
    for value in (b"two\nlines", b"\\x41\n", bytes(range(256))):
        printed = commands.text(value)
        assert len(printed.split()) == 1 and "\n" not in printed
        assert printed.encode().decode("unicode_escape").encode("latin-1") == value  # decodes back exactly


def test_error_lines_are_single_lines() -> None:
    assert commands.format_error("two\nlines  here") == "ERROR two lines here"


# ------------------------------------------------------------------ the piped loop


def test_script_of_every_command() -> None:
    script = "PUT a 1\nPUT a 2\nGET a\nGET b\nSWAP a 3\nSWAP b 9\nSCAN a z\nTX a c b\nDELETE a\nDELETE a\nGET a\nSTOP\n"
    assert run_script(script) == (
        "PUT a not_found\nPUT a found\nGET a 2\nGET b null\nSWAP a 2\nSWAP b null\n"
        "SCAN a z BEGIN\n  a 3\n  b 9\nSCAN END\n"
        "TX a c b BEGIN\n  a 3\n  c null\n  b 9\nTX END\n"
        "DELETE a found\nDELETE a not_found\nGET a null\nSTOP\n")


class StampingClient(DictClient):
    """A ``DictClient`` that numbers its writes like ``okapikv.Client``'s ``last_write_timestamp``."""

    def __init__(self) -> None:
        super().__init__()
        self.last_write_timestamp: int | None = None

    def _stamp(self) -> None:
        self.last_write_timestamp = (self.last_write_timestamp or 100) + 1

    def put(self, key: str, value: str) -> bool:
        found = super().put(key, value)
        self._stamp()
        return found

    def swap(self, key: str, value: str) -> bytes | None:
        old = super().swap(key, value)
        self._stamp()
        return old

    def delete(self, key: str) -> bool:
        found = super().delete(key)
        self._stamp()
        return found


TIMESTAMP_SCRIPT = "PUT a 1\nSWAP a 2\nGET a\nSCAN a z\nTX a\nDELETE a\nDELETE a\nSTOP\n"


def test_timestamps_end_write_lines_only() -> None:
    output = io.StringIO()
    assert serve(StampingClient(), io.StringIO(TIMESTAMP_SCRIPT), output, timestamps=True) == 0
    assert output.getvalue() == (
        "PUT a not_found ts=101\nSWAP a 1 ts=102\nGET a 2\nSCAN a z BEGIN\n  a 2\nSCAN END\n"
        "TX a BEGIN\n  a 2\nTX END\nDELETE a found ts=103\nDELETE a not_found ts=104\nSTOP\n")


def test_default_output_has_no_timestamps() -> None:
    assert run_script(TIMESTAMP_SCRIPT, StampingClient()) == (
        "PUT a not_found\nSWAP a 1\nGET a 2\nSCAN a z BEGIN\n  a 2\nSCAN END\n"
        "TX a BEGIN\n  a 2\nTX END\nDELETE a found\nDELETE a not_found\nSTOP\n")


def test_timestamps_without_a_known_timestamp_print_none() -> None:
    lines, _ = respond(DictClient(), "PUT a 1", timestamps=True)
    assert lines == ["PUT a not_found"]


def test_failed_write_prints_only_the_error_with_timestamps() -> None:
    client = StampingClient()
    client.fail_with = Unavailable("no answer")
    assert respond(client, "PUT a 1", timestamps=True) == (["ERROR unavailable: no answer"], False)


def test_client_flag_parses() -> None:
    from okapikv.cli import build_parser

    assert build_parser().parse_args(["client", "--timestamps"]).timestamps is True
    assert build_parser().parse_args(["client"]).timestamps is False
    assert build_parser().parse_args(["client", "--at-most-once"]).at_most_once is True
    assert build_parser().parse_args(["client"]).at_most_once is False


def test_stop_ends_input_processing() -> None:
    assert run_script("PUT a 1\nSTOP\nGET a\n") == "PUT a not_found\nSTOP\n"


def test_end_of_input_without_stop_is_a_clean_exit() -> None:
    assert run_script("PUT a 1\nGET a") == "PUT a not_found\nGET a 1\n"
    assert run_script("") == ""


def test_malformed_lines_print_one_error_and_continue() -> None:
    output = run_script("PUT a 1\nput a 2\n\nGET a b\nGET a\n").splitlines()
    assert output[0] == "PUT a not_found"
    assert output[1].startswith("ERROR ")
    assert output[2].startswith("ERROR ")
    assert output[3] == "GET a 1"
    assert len(output) == 4


@pytest.mark.parametrize(("error", "prefix"), [
    (Unavailable("no answer"), "ERROR unavailable: no answer"),
    (InvalidArgument("key too long"), "ERROR invalid argument: key too long"),
    (OkapiError("INTERNAL: boom"), "ERROR OkapiError: INTERNAL: boom"),
    (OutcomeUnknown("Put via h:1: UNAVAILABLE: Stream removed"), "ERROR outcome unknown: Put via h:1: UNAVAILABLE: "
                                                                 "Stream removed"),
])
def test_failed_operations_print_one_error(error: Exception, prefix: str) -> None:
    client = DictClient()
    client.fail_with = error
    lines, stop = respond(client, "SCAN a b")
    assert lines == [prefix]
    assert not stop


def test_results_are_flushed_after_each_command() -> None:
    class CountingOutput(io.StringIO):
        flushes = 0

        def flush(self) -> None:
            self.flushes += 1
            super().flush()

    output = CountingOutput()
    serve(DictClient(), io.StringIO("PUT a 1\nSCAN a b\nbad\n"), output)
    assert output.flushes == 3


class CountingClient(DictClient):
    """``DictClient`` with INCR and PUT's time to live (``okapi client --counters``)."""

    def __init__(self) -> None:
        super().__init__()
        self.ttls: dict[str, float | None] = {}

    def put(self, key: str, value: str, ttl: float | None = None) -> bool:
        self.ttls[key] = ttl
        return super().put(key, value)

    def incr(self, key: str, by: int = 1) -> int:
        value = int(self.data.get(key.encode(), b"0")) + by
        self.data[key.encode()] = str(value).encode()
        return value


def test_counter_commands_only_behind_the_flag() -> None:
    client = CountingClient()
    script = "INCR n\nINCR n\nPUTEX e v 250\nPUTEX e w 250\nPUTEX e v 0\nPUTEX e v x\nGET n\n"
    output = io.StringIO()
    assert serve(client, io.StringIO(script), output, counters=True) == 0
    lines = output.getvalue().splitlines()
    assert lines[:4] == ["INCR n 1", "INCR n 2", "PUTEX e not_found", "PUTEX e found"]
    assert lines[4].startswith("ERROR PUTEX needs a positive number") and lines[5].startswith("ERROR PUTEX")
    assert lines[6] == "GET n 2" and client.ttls["e"] == 0.25
    course = run_script("INCR n\nPUTEX e v 250\n", CountingClient()).splitlines()
    assert all(line.startswith("ERROR unknown command") for line in course)
    assert "INCR" not in course[0].split("expected one of")[1]
    from okapikv.cli import build_parser

    assert build_parser().parse_args(["client", "--counters"]).counters is True
    assert build_parser().parse_args(["client"]).counters is False
