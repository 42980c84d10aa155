"""`okapi load`'s input formats (``okapikv.client.load_file.records``): records in bounded chunks,
a malformed line named before its chunk is handed out."""

from __future__ import annotations

import pytest

from okapikv.client.load_file import LoadInputError, records


def test_tsv_lines_split_at_the_first_tab_in_chunks() -> None:
    lines = [b"a\t1\n", b"\n", b"b\tx\ty\r\n", b"c\t\n", b"d\t4"]  # blank skipped, \r dropped, empty value kept
    assert list(records(lines, "tsv", chunk=2)) == [[(b"a", b"1"), (b"b", b"x\ty")], [(b"c", b""), (b"d", b"4")]]


def test_put_lines_as_okapi_client_reads_them() -> None:
    assert list(records([b"PUT k1 v1\n", b"  PUT   k2 v2  \n"], "put")) == [[(b"k1", b"v1"), (b"k2", b"v2")]]


@pytest.mark.parametrize(("input_format", "line", "message"), [
    ("tsv", b"no tab", "line 2: no tab: expected key<TAB>value"),
    ("tsv", b"\tvalue", "line 2: empty key"),
    ("put", b"GET k", "line 2: expected PUT <key> <value>, not GET"),
    ("put", b"PUT k", "line 2: PUT takes 2 arguments, got 1"),
])
def test_a_malformed_line_stops_before_its_chunk(input_format: str, line: bytes, message: str) -> None:
    good = b"k\tv" if input_format == "tsv" else b"PUT k v"
    chunks = records([good, line, good], input_format, chunk=10)
    with pytest.raises(LoadInputError, match=message) as raised:
        next(chunks)
    assert raised.value.line == 2


def test_unknown_formats_and_empty_chunks_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown input format 'csv'"):
        list(records([], "csv"))
    with pytest.raises(ValueError, match="at least 1"):
        list(records([], "tsv", chunk=0))
