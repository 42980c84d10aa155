"""The RESP port's pure pieces: session tokens (``okapikv.resp.tokens``), Redis glob patterns
(``okapikv.resp.glob``), SCAN cursors and the reply encodings of RESP2 and RESP3."""

from __future__ import annotations

import base64
import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from okapikv.core.messages import Session
from okapikv.resp import replies
from okapikv.resp.cursors import TABLE_BASE, CursorTable
from okapikv.resp.glob import compile_pattern
from okapikv.resp.replies import Error, Simple
from okapikv.resp.tokens import TokenError, decode_token, encode_token

# ---------------------------------------------------------------- tokens


@given(st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=5), st.integers(0, (1 << 64) - 1), st.data())
def test_a_token_carries_the_session_and_its_dc_exactly(stable: list[int], dt: int, data: st.DataObject) -> None:
    dc = data.draw(st.integers(0, len(stable) - 1))
    token = encode_token(Session(tuple(stable), dt), dc, "cluster-a")
    assert re.fullmatch(rb"[A-Za-z0-9_-]+", token)
    decoded = decode_token(token, cluster_id="cluster-a", num_dcs=len(stable))
    assert (decoded.dc, decoded.session) == (dc, Session(tuple(stable), dt))


def test_three_dcs_make_a_58_character_token() -> None:
    assert len(encode_token(Session((1, 2, 3), 4), 0, "okapi-local")) == 58


TOKEN = encode_token(Session((10, 20, 30), 40), 1, "cluster-a")


@pytest.mark.parametrize(("token", "message"), [
    (b"not base64 at all!", "not the base64 text"),
    (b"", "too short"),
    (TOKEN[:-4], "checksum mismatch"),
    (TOKEN[:20] + (b"A" if TOKEN[20:21] != b"A" else b"B") + TOKEN[21:], "checksum mismatch"),
    (b"x" * 5000, "too long"),
])
def test_garbage_is_refused_with_a_reason(token: bytes, message: str) -> None:
    with pytest.raises(TokenError, match=message):
        decode_token(token, cluster_id="cluster-a", num_dcs=3)


def test_a_token_of_another_cluster_or_shape_or_version_is_refused() -> None:
    with pytest.raises(TokenError, match="another cluster"):
        decode_token(TOKEN, cluster_id="cluster-b", num_dcs=3)
    with pytest.raises(TokenError, match="cluster of 3 DCs; this one has 2"):
        decode_token(TOKEN, cluster_id="cluster-a", num_dcs=2)
    import struct
    import zlib
    raw = base64.urlsafe_b64decode(TOKEN + b"=" * (-len(TOKEN) % 4))
    body = b"\x02" + raw[1:-4]
    forged = base64.urlsafe_b64encode(body + struct.pack(">I", zlib.crc32(body))).rstrip(b"=")
    with pytest.raises(TokenError, match="version 2 is not supported"):
        decode_token(forged, cluster_id="cluster-a", num_dcs=3)


# ---------------------------------------------------------------- patterns


@pytest.mark.parametrize(("pattern", "key", "expected"), [
    (b"*", b"", True), (b"*", b"anything", True), (b"h?llo", b"hello", True), (b"h?llo", b"hllo", False),
    (b"h*llo", b"heeeello", True), (b"h*llo", b"hllo", True), (b"h*llo", b"hello!", False),
    (b"h[ae]llo", b"hallo", True), (b"h[ae]llo", b"hillo", False), (b"h[^e]llo", b"hallo", True),
    (b"h[^e]llo", b"hello", False), (b"h[a-b]llo", b"hbllo", True), (b"h[b-a]llo", b"hallo", True),
    (b"h\\*llo", b"h*llo", True), (b"h\\*llo", b"hello", False), (b"user:*:name", b"user:42:name", True),
    (b"user:*:name", b"user:42:mail", False), (b"*a*b*c*", b"xxaxxbxxcxx", True), (b"*a*b*c*", b"xxcxxbxxa", False),
    (b"exact", b"exact", True), (b"exact", b"exactly", False), (b"pre*", b"prefix", True), (b"pre*", b"pr", False),
])
def test_glob_matches_as_redis(pattern: bytes, key: bytes, expected: bool) -> None:
    assert compile_pattern(pattern).matches(key) is expected


def test_the_literal_prefix_bounds_the_keys_read() -> None:
    assert compile_pattern(b"user:*").prefix == b"user:"
    assert compile_pattern(b"us\\*er?").prefix == b"us*er"
    assert compile_pattern(b"[ab]x").prefix == b""
    assert compile_pattern(b"*x").prefix == b""


def test_a_pattern_of_many_stars_cannot_make_a_match_run_away() -> None:
    pattern, key = compile_pattern(b"*a" * 60 + b"*b"), b"a" * 1024
    started = time.perf_counter()
    assert not pattern.matches(key)
    assert time.perf_counter() - started < 5.0  # quadratic at most: a regex would backtrack for ages


# ---------------------------------------------------------------- cursors


@given(st.binary(min_size=1, max_size=1024))
def test_a_cursor_names_its_key_and_scan_goes_on_right_after_it(key: bytes) -> None:
    table = CursorTable()
    cursor = table.encode(key)
    assert cursor.isdigit() and cursor != b"0"
    assert 0 < int(cursor) < 2**63  # a signed or unsigned 64-bit integer in every client
    assert table.decode(cursor) == key + b"\x00"


@given(st.binary(min_size=1, max_size=7))
def test_a_short_keys_cursor_is_valid_on_any_server(key: bytes) -> None:
    assert CursorTable().decode(CursorTable().encode(key)) == key + b"\x00"


def test_a_long_keys_cursor_expires_once_its_entry_is_pushed_out() -> None:
    table = CursorTable(capacity=2)
    first = table.encode(b"a-long-key-0")
    assert table.decode(first) == b"a-long-key-0\x00"
    table.encode(b"a-long-key-1")
    table.encode(b"a-long-key-2")
    expired = table.decode(first)
    assert isinstance(expired, str) and "expired" in expired
    assert isinstance(CursorTable().decode(table.encode(b"another-long-key")), str)  # another server's


@pytest.mark.parametrize("cursor", [b"abc", b"-1", b"007", b"1", b"255", b"9" * 4000, str(2**63).encode()])
def test_a_cursor_no_scan_returned_is_refused(cursor: bytes) -> None:
    assert CursorTable().decode(cursor) is None


def test_cursor_zero_starts_at_the_first_key() -> None:
    assert CursorTable().decode(b"0") == b""
    assert int(CursorTable().encode(b"\xff" * 7)) < TABLE_BASE


# ---------------------------------------------------------------- replies


def test_resp2_and_resp3_differ_only_in_nulls_and_maps() -> None:
    value = {"a": [1, b"x", None, Simple("OK")], "b": Error("ERR no")}
    inner2, inner3 = b"*4\r\n:1\r\n$1\r\nx\r\n$-1\r\n+OK\r\n", b"*4\r\n:1\r\n$1\r\nx\r\n_\r\n+OK\r\n"
    assert replies.encode(value, resp3=False) == b"*4\r\n$1\r\na\r\n" + inner2 + b"$1\r\nb\r\n-ERR no\r\n"
    assert replies.encode(value, resp3=True) == b"%2\r\n$1\r\na\r\n" + inner3 + b"$1\r\nb\r\n-ERR no\r\n"


def test_an_error_text_never_breaks_the_framing() -> None:
    assert replies.error("ERR line one\r\nline two") == b"-ERR line one  line two\r\n"
