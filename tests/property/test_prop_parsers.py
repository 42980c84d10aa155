"""Every parser of untrusted input under its bounds (``okapikv.fuzz.parsers``): random bytes, and
valid inputs mutated (bytes replaced, inserted, deleted, headers announcing huge counts spliced in)
and split into reads at random, raise nothing but the parser's documented error, allocate within a
multiple of the bytes fed, take time in proportion to them, and (RESP) both parsers agree.

The suite's short run (seconds in all); the coverage-guided run with atheris is
``python scripts/fuzz_parsers.py --target NAME --seconds N`` (docs/testing.md)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from okapikv.fuzz.parsers import TARGETS, check, seeds

SETTINGS = settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow],
                    database=None)
#: what a peer announces in a few bytes: counts and lengths far beyond any bound
HOSTILE = [b"*2147483647\r\n", b"*1\r\n*99999\r\n", b"~100000\r\n", b"$2147483647\r\n", b"\xff\xff\xff\xff",
           b"partitions = 1000000000000\n", b'{"type": "meta", "dcs": 1000000000000}\n', b"[" * 2000,
           b"9" * 5000, b"TX" + b" k" * 2000 + b"\n"]


@st.composite
def mutated(draw: st.DrawFn, target: str) -> bytes:
    """A seed of ``target`` with a few random edits, then a random read size."""
    data = bytearray(draw(st.sampled_from(seeds(target)))[1:])
    for _ in range(draw(st.integers(0, 6))):
        position = draw(st.integers(0, len(data)))
        edit = draw(st.sampled_from(["replace", "insert", "delete", "hostile", "repeat"]))
        if edit == "replace" and position < len(data):
            data[position] = draw(st.integers(0, 255))
        elif edit == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif edit == "delete":
            del data[position:position + draw(st.integers(1, 8))]
        elif edit == "hostile":
            data[position:position] = draw(st.sampled_from(HOSTILE))
        elif edit == "repeat":
            data[position:position] = data[position:position + 64] * draw(st.integers(1, 8))
    return bytes([draw(st.integers(0, 17))]) + bytes(data)


@pytest.mark.parametrize("target", list(TARGETS))
@SETTINGS
@given(data=st.data())
def test_random_bytes_keep_the_bounds(target: str, data: st.DataObject) -> None:
    check(target, data.draw(st.binary(max_size=2048)))


@pytest.mark.parametrize("target", list(TARGETS))
@SETTINGS
@given(data=st.data())
def test_mutated_valid_inputs_keep_the_bounds(target: str, data: st.DataObject) -> None:
    check(target, data.draw(mutated(target)))


@pytest.mark.parametrize("target", list(TARGETS))
def test_every_seed_and_hostile_fragment_keeps_the_bounds(target: str) -> None:
    for seed in seeds(target):
        check(target, seed)
        for fragment in HOSTILE:
            check(target, seed + fragment)
            check(target, b"\x01" + fragment)
