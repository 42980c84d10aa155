"""The RESP port's request parsers (``okapikv.resp.parser``): the pure-Python one and hiredis's,
each alone and behind the canonical-frame fast path (what a server runs), run on the same cases,
must return the same commands and the same errors, however the bytes are split into reads, and must
enforce every bound from a header, before its bytes are buffered."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import pytest

from okapikv.resp.limits import RespLimits
from okapikv.resp.parser import (
    CanonicalFrames,
    HiredisParser,
    Parser,
    PythonParser,
    hiredis_available,
    make_parser,
    split_inline,
)

LIMITS = RespLimits(max_bulk_bytes=64, max_arguments=8, max_inline_bytes=128, max_request_bytes=256)

NO_HIREDIS = pytest.mark.skipif(not hiredis_available(), reason="hiredis is not installed")
PARSERS: list[object] = [
    pytest.param(PythonParser, id="python"),
    pytest.param(HiredisParser, id="hiredis", marks=NO_HIREDIS),
    pytest.param(lambda limits: CanonicalFrames(PythonParser(limits), limits), id="fast+python"),
    pytest.param(lambda limits: CanonicalFrames(HiredisParser(limits), limits), id="fast+hiredis", marks=NO_HIREDIS),
]
MakeParser = Callable[[RespLimits], Parser]


def encode(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(arg), arg) for arg in args)


def feed_all(make: MakeParser, chunks: list[bytes],
             limits: RespLimits = LIMITS) -> tuple[list[list[bytes]], str | None]:
    parser = make(limits)
    commands: list[list[bytes]] = []
    for chunk in chunks:
        parsed, error = parser.feed(chunk)
        commands += parsed
        if error is not None:
            return commands, error
    return commands, None


STREAM = (encode(b"SET", b"key:1", b"value") + encode(b"GET", b"key:1") + b"PING\r\n" + b"*0\r\n" + b"*-1\r\n"
          + encode(b"MGET", b"a", b"", b"c") + b"ECHO \"two words\" 'it\\'s'\r\n" + b"\r\n" + encode(b"PING"))
EXPECTED = [[b"SET", b"key:1", b"value"], [b"GET", b"key:1"], [b"PING"], [b"MGET", b"a", b"", b"c"],
            [b"ECHO", b"two words", b"it's"], [b"PING"]]


@pytest.mark.parametrize("make", PARSERS)
def test_multibulk_inline_and_empty_commands_in_one_read(make: MakeParser) -> None:
    assert feed_all(make, [STREAM]) == (EXPECTED, None)


@pytest.mark.parametrize("make", PARSERS)
@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 16])
def test_any_split_into_reads_gives_the_same_commands(make: MakeParser, size: int) -> None:
    chunks = [STREAM[index:index + size] for index in range(0, len(STREAM), size)]
    assert feed_all(make, chunks) == (EXPECTED, None)


@pytest.mark.parametrize("make", PARSERS)
def test_partial_is_true_exactly_while_a_request_is_half_sent(make: MakeParser) -> None:
    parser = make(LIMITS)
    frame = encode(b"GET", b"k")
    assert parser.feed(frame[:7]) == ([], None) and parser.partial
    assert parser.feed(frame[7:]) == ([[b"GET", b"k"]], None) and not parser.partial
    assert parser.feed(b"PIN") == ([], None) and parser.partial
    assert parser.feed(b"G\r\n") == ([[b"PING"]], None) and not parser.partial


@pytest.mark.parametrize("make", PARSERS)
def test_lengths_with_leading_zeros_are_read_as_hiredis_reads_them(make: MakeParser) -> None:
    assert feed_all(make, [b"*2\r\n$03\r\nGET\r\n$1\r\nk\r\n" + encode(b"PING")]) == ([[b"GET", b"k"], [b"PING"]], None)


BAD = {
    "a count that is not a number": (b"*x\r\n", "Protocol error: invalid multibulk length"),
    "more arguments than any command takes": (b"*9\r\n", "Protocol error: invalid multibulk length (9 arguments; "
                                                         "a command takes at most 8)"),
    "an element that is not a bulk string": (b"*1\r\n:1\r\n", "Protocol error: expected '$', got ':'"),
    "a nested array": (b"*1\r\n*1\r\n$1\r\na\r\n", "Protocol error: expected '$', got '*'"),
    "a negative bulk length": (b"*1\r\n$-1\r\n", "Protocol error: invalid bulk length"),
    "a bulk length that is not a number": (b"*1\r\n$+1\r\na\r\n", "Protocol error: invalid bulk length"),
    "a bulk string over the value limit, refused from its header": (
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$65\r\n",
        "Protocol error: invalid bulk length (65 bytes; the value limit is 64)"),
    "a request over the request limit": (b"*5\r\n" + (b"$60\r\n" + b"x" * 60 + b"\r\n") * 4 + b"$60\r\n",
                                         "Protocol error: a request of more than 256 bytes"),
    "an inline line over the inline limit": (b"GET " + b"k" * 200, "Protocol error: too big inline request"),
    "unbalanced quotes": (b"SET \"k v\r\n", "Protocol error: unbalanced quotes in request"),
    "a closing quote followed by text": (b"SET \"k\"v 1\r\n", "Protocol error: unbalanced quotes in request"),
    "a count header that never ends": (b"*" + b"1" * 200, "Protocol error: too big mbulk count string"),
}


@pytest.mark.parametrize("make", PARSERS)
@pytest.mark.parametrize("case", list(BAD))
def test_what_breaks_the_protocol_is_one_error_after_the_commands_before_it(make: MakeParser, case: str) -> None:
    data, message = BAD[case]
    before = encode(b"SET", b"a", b"1")
    assert feed_all(make, [before + data]) == ([[b"SET", b"a", b"1"]], message)
    # the same when the bad bytes arrive one at a time, after a read that ended mid-request
    chunks = [before[:5], before[5:]] + [data[index:index + 1] for index in range(len(data))]
    assert feed_all(make, chunks) == ([[b"SET", b"a", b"1"]], message)


@pytest.mark.parametrize("make", PARSERS)
def test_commands_after_a_protocol_error_are_never_returned(make: MakeParser) -> None:
    assert feed_all(make, [b"*1\r\n:1\r\n" + encode(b"DEL", b"k")]) == ([], "Protocol error: expected '$', got ':'")


@pytest.mark.parametrize("make", PARSERS)
def test_a_value_at_the_limit_is_accepted_and_the_parser_goes_on(make: MakeParser) -> None:
    value = b"v" * 64
    frames = encode(b"SET", b"k", value) + encode(b"GET", b"k")
    assert feed_all(make, [frames[:20], frames[20:90], frames[90:]]) == ([[b"SET", b"k", value], [b"GET", b"k"]],
                                                                         None)


class _Recording:
    """A ``PythonParser`` that records what it is handed (the parser behind ``CanonicalFrames``)."""

    def __init__(self) -> None:
        self.inner = PythonParser(LIMITS)
        self.handed: list[bytes] = []

    @property
    def partial(self) -> bool:
        return self.inner.partial

    @property
    def partial_bytes(self) -> int:
        return self.inner.partial_bytes

    def feed(self, data: bytes) -> tuple[list[list[bytes]], str | None]:
        self.handed.append(data)
        return self.inner.feed(data)


def test_the_fast_path_takes_canonical_requests_and_hands_on_the_rest_from_a_request_boundary() -> None:
    """What a client library writes never reaches the parser behind; a value holding CR LF, a
    length written otherwise, a request over a bound, an inline command and a half-sent request
    reach it from the start of their request, with what follows, and so get its answer."""
    canonical = encode(b"SET", b"key:1", b"v" * 64) + encode(b"GET", b"key:1") + encode(b"DEL", b"")
    recording = _Recording()
    assert CanonicalFrames(recording, LIMITS).feed(canonical) == (
        [[b"SET", b"key:1", b"v" * 64], [b"GET", b"key:1"], [b"DEL", b""]], None)
    assert recording.handed == []
    for rest in (encode(b"SET", b"k", b"a\r\nb"), b"*2\r\n$03\r\nGET\r\n$1\r\nk\r\n", encode(b"SET", b"k", b"v" * 65),
                 encode(b"MSET", *[b"v" * 64] * 5), b"GET k\r\n", b"*1\r\n$4\r\nPINGxx", b"*0\r\n",
                 encode(b"GET", b"k")[:-1]):
        recording = _Recording()
        got = CanonicalFrames(recording, LIMITS).feed(canonical + rest + canonical)
        assert recording.handed == [rest + canonical]
        assert got == feed_all(PythonParser, [canonical + rest + canonical])
    assert type(make_parser(LIMITS, prefer_hiredis=False)) is CanonicalFrames


def test_inline_splitting_follows_redis() -> None:
    assert split_inline(b'  set "a\\x41\\n" \'b c\'  d') == [b"set", b"aA\n", b"b c", b"d"]
    assert split_inline(b'"\\"q\\\\"') == [b'"q\\']
    assert split_inline(b"") == []
    assert split_inline(b'"open') is None
    assert split_inline(b"'open") is None


#: headers that announce far more than they carry, each shaped to reach a different path of a parser
HUGE_HEADERS = {
    "an array count": b"*2147483647\r\n",
    "an array count after a command": encode(b"PING") + b"*2147483647\r\n",
    "a nested array count": b"*1\r\n*2147483647\r\n",
    "a nested set count": b"*2\r\n$3\r\nGET\r\n~2147483647\r\n",
    "a nested push count": b"*1\r\n>2147483647\r\n",
    "a nested attribute count": b"*1\r\n|2147483647\r\n",
    "a nested map count": b"*1\r\n%1073741823\r\n",
    "a bulk length": b"*2\r\n$3\r\nGET\r\n$2147483647\r\n",
}


@pytest.mark.parametrize("make", PARSERS)
@pytest.mark.parametrize("case", list(HUGE_HEADERS))
def test_a_huge_announcement_costs_memory_in_proportion_to_the_bytes_received(make: MakeParser, case: str) -> None:
    """hiredis preallocates an aggregate's elements from its header: before the parser bounds the
    headers hiredis sees, ``*2147483647`` made it allocate 16 GiB of element slots and held the
    server's loop for seconds. Whole or a byte at a time, the header is refused at the cost of its
    bytes."""
    data = HUGE_HEADERS[case]
    limits = RespLimits(max_bulk_bytes=1 << 20, max_arguments=10_001)
    for chunks in ([data], [data[index:index + 1] for index in range(len(data))]):
        tracemalloc.start()
        try:
            commands, error = feed_all(make, chunks, limits)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert error is not None and error.startswith("Protocol error: ")
        assert peak < 256 << 10, f"{case}: {peak} bytes allocated for {len(data)} received"


@pytest.mark.parametrize("make", PARSERS)
def test_large_counts_within_the_bounds_and_values_that_look_like_headers_are_requests(make: MakeParser) -> None:
    """The hostile-header check lets a request's own count of 10 or more through, and hands text in
    a value that looks like an aggregate header to the pure parser, which reads it as a value."""
    limits = RespLimits(max_bulk_bytes=1 << 10, max_arguments=40)
    mget = [b"MGET", *(b"k%d" % index for index in range(30))]
    tricky = [b"SET", b"k", b"*12\r\n~99\r\n>10\r\n|20\r\n%10\r\n*2147483647\r\n"]
    stream = encode(*mget) + encode(*tricky) + encode(*mget)
    for size in (len(stream), 7, 1):
        chunks = [stream[index:index + size] for index in range(0, len(stream), size)]
        assert feed_all(make, chunks, limits) == ([mget, tricky, mget], None)
    assert feed_all(make, [encode(*mget, b"x" * 0, *mget[1:11])], limits)[1] == (
        "Protocol error: invalid multibulk length (42 arguments; a command takes at most 40)")


@pytest.mark.parametrize("make", PARSERS)
def test_an_inline_line_that_starts_like_a_reply_after_a_frame_split_after_its_first_byte(make: MakeParser) -> None:
    """Found by the fuzz target (``okapikv.fuzz.parsers``): after a frame, hiredis waited for the body
    of what it took for a bulk reply (``$2``), while the shadow parser read the inline command
    there and dropped it, so the command before a protocol error was lost."""
    frame = encode(b"GET", b"k")
    lines = b"$2\r\nk'\r9\r\n"
    expected = ([[b"GET", b"k"], [b"$2"]], "Protocol error: unbalanced quotes in request")
    assert feed_all(make, [frame + lines]) == expected
    for cut in range(1, len(lines)):
        assert feed_all(make, [frame + lines[:cut], lines[cut:]]) == expected
        assert feed_all(make, [frame[:3], frame[3:] + lines[:cut], lines[cut:cut + 3], lines[cut + 3:]]) == expected


@pytest.mark.parametrize("make", PARSERS)
def test_a_simple_string_element_is_refused_even_where_its_length_lines_up(make: MakeParser) -> None:
    """Found by the fuzz target: hiredis returns ``+text`` as bytes, like a bulk string, and this
    one's shorter encoding ended on a CR LF where a bulk string's would have: it was run as SET."""
    data = b"*3\r\n$3\r\nSET\r\n$1\r\nk\x00*+\x00\x00\x00\x89\x99\x89\x00\xff\x00*++\xff\xff\xff\xff\r\n$1\r\nv\xff"
    assert feed_all(make, [data]) == ([], "Protocol error: expected '$', got '+'")
    assert feed_all(make, [b"*2\r\n$3\r\nGET\r\n+k\r\n"]) == ([], "Protocol error: expected '$', got '+'")


def test_the_environment_picks_the_parser_of_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    from okapikv.resp.parser import PARSER_VARIABLE, hiredis_preferred

    monkeypatch.delenv(PARSER_VARIABLE, raising=False)
    assert hiredis_preferred()
    monkeypatch.setenv(PARSER_VARIABLE, "python")
    assert not hiredis_preferred()
    monkeypatch.setenv(PARSER_VARIABLE, "c")
    with pytest.raises(ValueError, match="OKAPI_RESP_PARSER must be hiredis or python, not 'c'"):
        hiredis_preferred()
