"""Bulk loading against real servers (``okapikv.client.bulk``, `okapi load`; docs/operations.md,
"Loading data"): every record reaches its partition as a PUT of the loading session, is read back
by that session and replicated to the other DC; a refused PUT stops the load with the count of
acknowledged ones; `okapi load` reads its two formats and names a malformed line."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from integration_support import RunningCluster

from okapikv.client.aio import AsyncClient
from okapikv.client.sync import Client
from okapikv.errors import BulkLoadFailed, InvalidArgument
from okapikv.wire import okapikv_pb2 as pb


def _okapi_load(cluster: RunningCluster, path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "okapikv.cli", "load", str(path), "--connect",
                           cluster.address("dc0", 0), *extra], capture_output=True, text=True, timeout=120, check=False)


def test_bulk_put_reaches_every_partition_as_puts_of_the_session(cluster: RunningCluster) -> None:
    pairs = [(b"bulk%05d" % index, b"value%d" % index) for index in range(3_000)]
    with Client(cluster.address("dc0", 0)) as client:
        assert client.bulk_put(pairs, batch=250) == 3_000  # many batches, both partitions
        assert client.last_write_timestamp is not None
        assert client.get(b"bulk02999") == b"value2999"  # read-your-writes: the session merged the replies
        assert client.scan(b"bulk", b"bulk~") == sorted(pairs)
    with Client(cluster.address("dc1", 0)) as remote:  # replicated like any PUT
        deadline = time.monotonic() + 30
        while remote.get(b"bulk00000") != b"value0" or remote.get(b"bulk02999") != b"value2999":
            assert time.monotonic() < deadline, "bulk-loaded records not visible in the other DC"
            time.sleep(0.05)


def test_the_async_client_loads_too_and_an_empty_load_writes_nothing(cluster: RunningCluster) -> None:
    async def main() -> None:
        async with AsyncClient(cluster.address("dc0", 0)) as client:
            assert await client.bulk_put([]) == 0 and client.last_write_timestamp is None
            assert await client.bulk_put([("async-a", "1"), ("async-b", "2")]) == 2
            assert await client.get("async-b") == b"2"

    import asyncio

    asyncio.run(main())


def test_a_refused_put_stops_the_load_with_what_was_acknowledged(cluster: RunningCluster) -> None:
    too_big = b"x" * ((1 << 20) + 1)  # over the cluster's max_value_bytes
    with Client(cluster.address("dc0", 0)) as client:
        with pytest.raises(InvalidArgument, match="pairs"):
            client.bulk_put([(b"fine", b"v"), b"not a pair"])  # type: ignore[list-item]
        assert client.get(b"fine") is None  # refused before anything was sent
        pairs = [(b"refused%03d" % index, b"v") for index in range(50)] + [(b"refused-big", too_big)]
        with pytest.raises(BulkLoadFailed) as failed:
            client.bulk_put(pairs, batch=10)
        assert failed.value.written <= 50 and "refused-big" in str(failed.value)
        assert failed.value.cause.__class__.__name__ == "InvalidArgument", failed.value.cause
        # Every acknowledged pair was applied. How many were acknowledged depends on the race
        # between the partitions' loads: the first failure stops the others (okapikv.client.bulk).
        present = sum(client.get(b"refused%03d" % index) == b"v" for index in range(50))
        assert present >= failed.value.written


def test_a_bulk_put_with_a_key_of_another_partition_is_refused_whole(cluster: RunningCluster) -> None:
    """The server checks every key's partition before the core writes any pair (docs/protocol.md,
    "Bulk PUT"); the same request with only its own keys is written and answered once."""
    from okapikv.core.partitioning import partition_of

    keys = [b"route%03d" % index for index in range(40)]
    own = [key for key in keys if partition_of(key, 2) == 0]
    assert 0 < len(own) < len(keys)

    def send(batch_keys: list[bytes]) -> pb.Result:
        batch = pb.OperationBatch()
        operation = batch.operations.add(id=9)
        operation.put_many.keys.extend(batch_keys)
        operation.put_many.values.extend([b"v"] * len(batch_keys))
        operation.put_many.session.time = 0
        [results] = list(cluster.stub(0, 0).Pipeline(iter([batch]), timeout=10))
        [result] = results.results
        return result

    refused = send(keys)
    assert refused.id == 9 and refused.error.code == "FAILED_PRECONDITION", refused
    assert "belongs to partition 1" in refused.error.message
    with Client(cluster.address("dc0", 0)) as client:
        assert all(client.get(key) is None for key in keys)
        written = send(own)
        assert written.WhichOneof("result") == "put_many" and written.put_many.count == len(own)
        assert client.get(own[-1]) == b"v"


def test_okapi_load_reads_tsv_and_put_lines(cluster: RunningCluster, tmp_path: Path) -> None:
    tsv = tmp_path / "records.tsv"
    tsv.write_bytes(b"".join(b"tsv%04d\tvalue\twith tab %d\r\n" % (index, index) for index in range(500)) + b"\n")
    done = _okapi_load(cluster, tsv, "--chunk", "128")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("loaded 500 record(s) in ")
    put = tmp_path / "records.put"
    put.write_text("PUT putkey1 one\n\nPUT putkey2 two\n")
    done = _okapi_load(cluster, put, "--format", "put")
    assert done.returncode == 0 and "loaded 2 record(s)" in done.stdout, done.stderr
    with Client(cluster.address("dc0", 0)) as client:
        assert client.get(b"tsv0499") == b"value\twith tab 499"
        assert client.get(b"putkey2") == b"two"


def test_okapi_load_names_a_malformed_line_and_sends_nothing_of_its_chunk(cluster: RunningCluster,
                                                                        tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"badload1\tv\nno tab here\nbadload2\tv\n")
    done = _okapi_load(cluster, bad)
    assert done.returncode == 2
    assert "line 2: no tab: expected key<TAB>value (0 record(s) of the chunks before it were loaded)" in done.stderr
    with Client(cluster.address("dc0", 0)) as client:
        assert client.get(b"badload1") is None
    done = _okapi_load(cluster, tmp_path / "missing.tsv")
    assert done.returncode == 2 and "cannot read" in done.stderr


def test_bulk_put_over_grpc_streams_without_the_native_port(cluster: RunningCluster) -> None:
    pairs = [(b"grpc%04d" % index, b"v%d" % index) for index in range(600)]
    with Client(cluster.address("dc0", 0), native=False) as client:
        assert client.bulk_put(pairs, batch=100) == 600
        assert client.get(b"grpc0599") == b"v599"
