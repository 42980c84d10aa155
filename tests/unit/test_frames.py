"""The native port's framing (``okapikv.wire.frames``): frames survive any split of the byte
stream, and a peer that breaks the format is refused from the bytes it sent, before its payload is
buffered."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from okapikv.wire.frames import MAGIC, MAGIC_V2, FrameDecoder, FrameError, encode_frame


@given(payloads=st.lists(st.binary(max_size=300), max_size=20), cuts=st.lists(st.integers(0, 10_000), max_size=30),
       preamble=st.booleans())
def test_frames_survive_any_split_of_the_stream(payloads: list[bytes], cuts: list[int], preamble: bool) -> None:
    stream = (MAGIC if preamble else b"") + b"".join(encode_frame(payload) for payload in payloads)
    decoder = FrameDecoder(expect_magic=preamble)
    received: list[bytes] = []
    start = 0
    for cut in sorted({min(cut, len(stream)) for cut in cuts} | {len(stream)}):
        received += decoder.feed(stream[start:cut])
        start = cut
    assert received == payloads
    assert decoder.buffered == 0


@pytest.mark.parametrize("garbage", [b"GET / HTTP/1.1\r\n", b"PRI * HTTP/2.0", b"\x00" * 8, b"OKAPIKV2", b"X"])
def test_a_bad_preamble_is_refused_at_its_first_wrong_byte(garbage: bytes) -> None:
    with pytest.raises(FrameError, match="preamble"):
        FrameDecoder(expect_magic=True).feed(garbage)


def test_a_partial_preamble_waits_for_the_rest() -> None:
    decoder = FrameDecoder(expect_magic=True)
    assert decoder.feed(MAGIC[:3]) == []
    assert decoder.feed(MAGIC[3:] + encode_frame(b"abc")) == [b"abc"]


def test_an_oversized_frame_is_refused_from_its_length_alone() -> None:
    decoder = FrameDecoder(max_frame_bytes=1000, expect_magic=True)
    assert decoder.feed(MAGIC + encode_frame(b"x" * 1000)) == [b"x" * 1000]
    with pytest.raises(FrameError, match="1001 bytes exceeds the limit of 1000"):
        decoder.feed(encode_frame(b"y" * 1001)[:4])  # the length prefix is enough


def test_an_unknown_preamble_version_is_refused_naming_the_versions_served() -> None:
    decoder = FrameDecoder(expect_magic=True, preambles=(MAGIC_V2, MAGIC))
    with pytest.raises(FrameError, match=r"unknown preamble: native-port protocol version '9' is not served here "
                                         r"\(this server speaks version 1, 2\)"):
        decoder.feed(b"OKAPIKV9" + encode_frame(b"x"))
    for preamble in (MAGIC, MAGIC_V2):
        decoder = FrameDecoder(expect_magic=True, preambles=(MAGIC_V2, MAGIC))
        assert decoder.feed(preamble + encode_frame(b"x")) == [b"x"] and decoder.preamble == preamble
