"""Damaged and lost data with real server processes (docs/operations.md, "Storage integrity and replacing a disk"):

1. every kind of damage stops the start with one line on stderr (no traceback) and exit status 4
   (damage) or 1 (a directory this server cannot use): a flipped byte inside a stored value, a
   malformed page, a metadata row missing a field, a log cut short after kill -9 (naming the lost
   groups and writes), a damaged log record followed by valid ones, a truncated database, an
   unreadable file, a file that is not a database, a data directory of another format, a damaged or
   missing commit record;
2. repair from replicas (3 DCs x 1 partition): a server whose log was cut or damaged, or whose disk was
   replaced by an empty one, restarted with --repair, reads back every acknowledged write that had
   reached a replica, its own included, and its new writes take timestamps above its old ones;
3. `okapi up --repair` rebuilds a server's lost data directory the same way;
4. a full disk (a 32 MiB tmpfs): writes fail with RESOURCE_EXHAUSTED "disk full" while the server
   stays up and serves reads, and a restart on the still-full disk fails at start with one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from durability_support import DurableCluster, durable_cluster, wait_for
from integration_support import free_port_range

from okapikv.client.sync import Client
from okapikv.cluster.launcher import READY_LINE
from okapikv.storage.group_commit import DEFAULT_CLOCK_LEAD_US
from okapikv.storage.integrity import meta_checksum
from okapikv.storage.log import FRAME, MAGIC, segments
from okapikv.wire import okapikv_pb2 as pb

pytestmark = pytest.mark.slow

DATABASE = "okapi.sqlite3"
VALUE_PAD = b"Z" * 40


def value_of(index: int) -> bytes:
    return b"value-%04d-" % index + VALUE_PAD


def put_all(cluster: DurableCluster, dc: str, keys: range, prefix: str = "k") -> dict[bytes, int]:
    """PUT ``prefix-i`` = value_of(i) for each i; returns each key's timestamp."""
    stub = cluster.stub(dc, 0)
    stamps = {}
    for index in keys:
        key = f"{prefix}-{index:04d}".encode()
        reply = stub.Put(pb.PutRequest(key=key, value=value_of(index)), timeout=30, wait_for_ready=True)
        stamps[key] = reply.timestamp
    return stamps


def backed_up(cluster: DurableCluster, first: range, backup: Path, then: range) -> None:
    """PUT ``first`` through a/0, stop it cleanly and copy its data directory to ``backup``, start
    it again and PUT ``then``."""
    put_all(cluster, "a", first)
    cluster.stop("a", 0)
    shutil.copytree(cluster.data_dir("a", 0), backup)
    cluster.start("a", 0)
    cluster.wait_serving()
    put_all(cluster, "a", then)


def assert_one_line_refusal(status: int, stderr: str, expected_status: int, *phrases: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    assert status == expected_status, (status, stderr)
    assert lines[0].startswith("okapi server a/0: "), stderr
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])


# ====================================================================== every kind of damage


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DurableCluster, Path, Path]]:
    """One durable server's data, twice: stopped cleanly (``clean``: everything in the main file)
    and killed with SIGKILL right after more writes (``killed``: recent groups only in the log)."""
    root = tmp_path_factory.mktemp("damage")
    with durable_cluster(root, ("a",), 1, wan_ms=0) as cluster:
        clean = root / "clean"
        backed_up(cluster, range(200), clean, range(200, 350))  # fewer than SQLite's automatic checkpoint
        cluster.stop("a", 0, signal.SIGKILL)
        killed = root / "killed"
        shutil.copytree(cluster.data_dir("a", 0), killed)
        yield cluster, clean, killed


def _flip_value_byte(directory: Path) -> None:
    path = directory / DATABASE
    data = bytearray(path.read_bytes())
    at = data.find(value_of(100))
    assert at >= 0 and data.find(value_of(100), at + 1) < 0
    data[at + 20] ^= 0x01  # inside the Z padding
    path.write_bytes(bytes(data))


def _malform_page(directory: Path) -> None:
    """Overwrite the b-tree page header of the page that holds a stored value (SQLite reads that
    page only when recovery loads the versions)."""
    path = directory / DATABASE
    data = path.read_bytes()
    page = data.find(value_of(150)) // 4096
    with path.open("r+b") as file:
        file.seek(4096 * page)
        file.write(b"\xff" * 12)


def _update_meta(directory: Path, name: str, change: Callable[[dict[str, object]], object], *,
                 keep_checksum: bool) -> None:
    with contextlib.closing(sqlite3.connect(directory / DATABASE)) as db:
        value, crc = db.execute("SELECT value, crc FROM meta WHERE name = ?", (name,)).fetchone()
        data = json.loads(value)
        change(data)
        text = json.dumps(data)
        db.execute("UPDATE meta SET value = ?, crc = ? WHERE name = ?",
                   (text, crc if keep_checksum else meta_checksum(name, text), name))
        db.commit()


def _cut_log(directory: Path) -> None:
    """Cut the newest log segment after its first record: every later group is lost."""
    newest = segments(directory)[-1]
    data = newest.read_bytes()
    header_end = len(MAGIC) + FRAME.size + FRAME.unpack_from(data, len(MAGIC))[0]
    first_end = header_end + FRAME.size + FRAME.unpack_from(data, header_end)[0]
    assert len(data) > first_end + 10 * FRAME.size, "the last groups should be in the log"
    os.truncate(newest, first_end)


def _damage_log_record(directory: Path) -> None:
    """Flip a byte inside the newest segment's first record (valid records follow it)."""
    newest = segments(directory)[-1]
    data = bytearray(newest.read_bytes())
    header_end = len(MAGIC) + FRAME.size + FRAME.unpack_from(data, len(MAGIC))[0]
    assert len(data) > header_end + 20 * FRAME.size, "the last groups should be in the log"
    data[header_end + FRAME.size + 4] ^= 0x01
    newest.write_bytes(bytes(data))


def _make_unreadable(directory: Path) -> None:
    path = directory / DATABASE
    if os.geteuid() != 0:
        path.chmod(0)
    else:  # root reads any file: a directory where the file should be cannot be read either
        path.unlink()
        path.mkdir()


def _replace_with_garbage(directory: Path) -> None:
    (directory / DATABASE).write_bytes(os.urandom(64 * 1024))


DAMAGE: dict[str, tuple[str, Callable[[Path], object], int, tuple[str, ...]]] = {
    "value-byte": ("clean", _flip_value_byte, 4, ("fails its checksum", "k-0100")),
    "malformed-page": ("clean", _malform_page, 4, ("is damaged", "SQLite quick_check")),
    "meta-missing-field": ("clean", lambda d: _update_meta(d, "state", lambda v: v.pop("horizon"), keep_checksum=True),
                           4, ("metadata row 'state' fails its checksum",)),
    "meta-missing-field-checksummed": (
        "clean", lambda d: _update_meta(d, "state", lambda v: v.pop("horizon"), keep_checksum=False),
        4, ("metadata row 'state' lacks field 'horizon'",)),
    "damaged-log-record": ("killed", _damage_log_record, 4, ("log-", "fails its checksum", "--repair")),
    "cut-log": ("killed", _cut_log, 4, ("lost committed writes", "group(s) are missing", "acknowledged local write")),
    "truncated-db": ("clean", lambda d: os.truncate(d / DATABASE, (d / DATABASE).stat().st_size // 2), 4,
                     ("okapi.sqlite3",)),
    "unreadable-file": ("clean", _make_unreadable, 1, ("okapi.sqlite3",)),
    "not-a-database": ("clean", _replace_with_garbage, 4, ("file is not a database",)),
    "other-format": ("clean", lambda d: _update_meta(d, "identity", lambda v: v.update(format=99), keep_checksum=False),
                     1, ("data format 99",)),
    "record-damaged": ("clean", lambda d: (d / "COMMITTED").write_bytes(os.urandom(128)), 4,
                       ("COMMITTED is damaged",)),
    "record-missing": ("clean", lambda d: (d / "COMMITTED").unlink(), 4, ("COMMITTED is missing",)),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_every_kind_of_damage_stops_the_start_with_one_line(stored: tuple[DurableCluster, Path, Path],
                                                            kind: str) -> None:
    cluster, clean, killed = stored
    source, damage, expected_status, phrases = DAMAGE[kind]
    target = cluster.data_dir("a", 0)
    shutil.rmtree(target)
    shutil.copytree(clean if source == "clean" else killed, target)
    damage(target)
    status, stderr = cluster.run_to_exit("a", 0, timeout_s=30)
    assert_one_line_refusal(status, stderr, expected_status, *phrases)


def test_a_cut_log_names_the_writes_it_lost(stored: tuple[DurableCluster, Path, Path]) -> None:
    """The count in the error is the number of acknowledged writes really missing: a repair of the
    one-DC server (no replicas: it keeps what verifies) reads back exactly 350 minus that many."""
    cluster, _, killed = stored
    target = cluster.data_dir("a", 0)
    shutil.rmtree(target)
    shutil.copytree(killed, target)
    _cut_log(target)
    status, stderr = cluster.run_to_exit("a", 0, timeout_s=30)
    assert status == 4 and "Traceback" not in stderr
    lost = int(stderr.split("group(s) are missing with ")[1].split(" acknowledged local write")[0])
    assert lost > 0
    cluster.start("a", 0, "--repair")
    cluster.wait_serving()
    stub = cluster.stub("a", 0)
    readable = sum(
        stub.Get(pb.GetRequest(key=f"k-{index:04d}".encode()), timeout=30).value == value_of(index)
        for index in range(350)
    )
    assert readable == 350 - lost
    cluster.stop("a", 0)


# ====================================================================== repair from the replicas


def _lose_data(cluster: DurableCluster, how: str) -> None:
    directory = cluster.data_dir("a", 0)
    if how == "cut-log":
        _cut_log(directory)
    elif how == "damaged-log-record":
        _damage_log_record(directory)
    else:  # a new, empty disk
        shutil.rmtree(directory)


@pytest.mark.parametrize("how", ["cut-log", "damaged-log-record", "empty-disk"])
def test_a_server_repairs_its_lost_data_from_its_replicas(tmp_path: Path, how: str) -> None:
    with durable_cluster(tmp_path, ("a", "b", "c"), 1, wan_ms=2) as cluster:
        stamps = put_all(cluster, "a", range(400))
        theirs = put_all(cluster, "b", range(50), prefix="b")
        stubs = {dc: cluster.stub(dc, 0) for dc in ("b", "c")}

        def replicated() -> bool:
            for stub in stubs.values():
                reply = stub.Scan(pb.ScanRequest(start=b"k-", end=b"k-~"), timeout=30)
                if len(reply.items) < 400:
                    return False
            return True

        wait_for(replicated, 60, "a's writes reaching b and c")
        cluster.stop("a", 0, signal.SIGKILL)
        _lose_data(cluster, how)
        if how == "cut-log":
            status, stderr = cluster.run_to_exit("a", 0, timeout_s=30)
            assert status == 4 and "lost committed writes" in stderr and "Traceback" not in stderr
        cluster.start("a", 0, "--repair")
        cluster.wait_serving()
        stub = cluster.stub("a", 0)

        def repaired() -> bool:
            try:
                stats = cluster.stats("a", 0)
            except grpc.RpcError:
                return False
            return stats["repairing"] is None

        wait_for(repaired, 60, "the repair")
        mine = stub.Scan(pb.ScanRequest(start=b"k-", end=b"k-~"), timeout=30)
        assert {item.key: item.value for item in mine.items} == {
            f"k-{index:04d}".encode(): value_of(index) for index in range(400)}
        other = stub.Scan(pb.ScanRequest(start=b"b-", end=b"b-~"), timeout=30)
        assert len(other.items) == len(theirs)
        reply = stub.Put(pb.PutRequest(key=b"after-repair", value=b"new"), timeout=30)
        assert reply.timestamp > max(stamps.values())
        wait_for(lambda: stubs["b"].Get(pb.GetRequest(key=b"after-repair"), timeout=30).value == b"new", 30,
                 "the new write reaching b")
        log = cluster.log_path("a", 0).read_text()
        assert "repair complete" in log and "Traceback" not in log
        wait_for(lambda: not (cluster.data_dir("a", 0) / "REPAIRING").exists(), 30, "the repair marker's removal")


def test_an_empty_directory_started_without_repair_says_its_data_was_lost(tmp_path: Path) -> None:
    with durable_cluster(tmp_path, ("a", "b"), 1, wan_ms=2) as cluster:
        put_all(cluster, "a", range(20))
        other = cluster.stub("b", 0)
        wait_for(lambda: len(other.Scan(pb.ScanRequest(start=b"k-", end=b"k-~"), timeout=30).items) == 20, 30,
                 "a's writes reaching b")
        cluster.stop("a", 0, signal.SIGKILL)
        shutil.rmtree(cluster.data_dir("a", 0))
        cluster.start("a", 0)
        cluster.wait_serving()
        wait_for(lambda: "its data was lost. Restart it with --repair" in cluster.log_path("a", 0).read_text(), 30,
                 "the data_lost error")


def test_an_empty_directory_is_found_out_when_its_replica_restarted_too(tmp_path: Path) -> None:
    """The whole cluster stopped, one data directory lost meanwhile, every server started again: the
    replica, up first, asks the empty server back and learns its new incarnation's heartbeats from
    that catch-up, yet the loss still shows (``okapikv.core.catchup``, the superseded request)."""
    with durable_cluster(tmp_path, ("a", "b"), 1, wan_ms=2) as cluster:
        put_all(cluster, "a", range(20))
        other = cluster.stub("b", 0)
        wait_for(lambda: len(other.Scan(pb.ScanRequest(start=b"k-", end=b"k-~"), timeout=30).items) == 20, 30,
                 "a's writes reaching b")
        cluster.stop("a", 0)
        cluster.stop("b", 0)
        shutil.rmtree(cluster.data_dir("a", 0))
        cluster.start("b", 0)
        cluster.start("a", 0)
        cluster.wait_serving()
        wait_for(lambda: "its data was lost. Restart it with --repair" in cluster.log_path("a", 0).read_text(), 30,
                 "the data_lost error")
        wait_for(lambda: cluster.stats("a", 0)["repairing"] == "lost", 30, "the refusal")


def test_an_older_copy_of_the_disk_refuses_clients_until_repaired(tmp_path: Path) -> None:
    """A data directory restored from an older copy holds less than the replicas know: the first
    replica's answer shows it, the server refuses clients (naming --repair) instead of serving reads
    that miss acknowledged writes, and --repair brings them back."""
    with durable_cluster(tmp_path, ("a", "b"), 1, wan_ms=2) as cluster:
        backup = tmp_path / "backup"
        backed_up(cluster, range(10), backup, range(0))
        # The copy's clock bound runs DEFAULT_CLOCK_LEAD_US ahead of its last write: what a replica
        # holds below it cannot be told from this server's own heartbeats (docs/operations.md).
        time.sleep(DEFAULT_CLOCK_LEAD_US / 1e6 + 0.2)
        put_all(cluster, "a", range(10, 20))
        other = cluster.stub("b", 0)
        wait_for(lambda: len(other.Scan(pb.ScanRequest(start=b"k-", end=b"k-~"), timeout=30).items) == 20, 30,
                 "a's writes reaching b")
        cluster.stop("a", 0, signal.SIGKILL)
        shutil.rmtree(cluster.data_dir("a", 0))
        shutil.copytree(backup, cluster.data_dir("a", 0))
        cluster.start("a", 0)
        cluster.wait_serving()
        wait_for(lambda: cluster.stats("a", 0)["repairing"] == "lost", 30, "the loss to show")
        with pytest.raises(grpc.RpcError) as refused:
            cluster.stub("a", 0).Get(pb.GetRequest(key=b"k-0015"), timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE and "--repair" in str(refused.value.details())
        wait_for(lambda: "is older than its replicas know" in cluster.log_path("a", 0).read_text(), 30, "the log")
        cluster.stop("a", 0)
        cluster.start("a", 0, "--repair")
        cluster.wait_serving()
        wait_for(lambda: cluster.stats("a", 0)["repairing"] is None, 60, "the repair")
        assert cluster.stub("a", 0).Get(pb.GetRequest(key=b"k-0015"), timeout=30).value == value_of(15)
        wait_for(lambda: "repair complete" in cluster.log_path("a", 0).read_text(), 30, "the repair's end")
        cluster.stop("a", 0)
        cluster.start("a", 0)  # what the repair fetched is on disk: no loss shows any more
        cluster.wait_serving()
        assert cluster.stub("a", 0).Get(pb.GetRequest(key=b"k-0015"), timeout=30).value == value_of(15)
        assert cluster.stats("a", 0)["repairing"] is None


def test_a_new_cluster_with_empty_directories_reports_no_lost_data(tmp_path: Path) -> None:
    """A new cluster's servers start empty at the same moment: a replica's catch-up answer may
    already hold the asker's own first heartbeats, which are not data of an earlier incarnation."""
    with durable_cluster(tmp_path, ("a", "b", "c"), 1, wan_ms=20) as cluster:
        put_all(cluster, "a", range(5))
        time.sleep(1.0)
        logs = "".join(cluster.log_path(dc, 0).read_text() for dc in "abc")
        assert "data was lost" not in logs and "data_lost" not in logs


# ====================================================================== a full disk


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 32 MiB tmpfs, always unmounted (skipped where mounting is not allowed)."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mount_point)],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip() or result.returncode}")
    try:
        yield mount_point
    finally:
        for _ in range(50):
            if subprocess.run(["umount", str(mount_point)], capture_output=True, check=False).returncode == 0:
                break
            time.sleep(0.1)


def test_a_full_disk_refuses_writes_keeps_reads_and_a_restart_says_why(tmp_path: Path, tiny_disk: Path) -> None:
    with durable_cluster(tmp_path, ("a",), 1, wan_ms=0) as cluster:
        cluster.stop("a", 0)
        directory = tiny_disk / "a-p0"
        directory.mkdir()
        shutil.rmtree(cluster.data_dir("a", 0))
        cluster.data_dir("a", 0).symlink_to(directory, target_is_directory=True)
        cluster.start("a", 0, "--disk-reserve-mb", "6")
        cluster.wait_serving()
        stub = cluster.stub("a", 0)
        value = os.urandom(32 * 1024)
        written: list[bytes] = []
        refusal = None
        for index in range(5000):
            key = b"fill-%05d" % index
            try:
                stub.Put(pb.PutRequest(key=key, value=value), timeout=30)
            except grpc.RpcError as error:
                refusal = error
                break
            written.append(key)
        assert refusal is not None, "the disk never filled"
        assert refusal.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "disk full" in (refusal.details() or "")
        assert "not applied" in (refusal.details() or "")
        assert cluster.processes[("a", 0)].poll() is None  # still up
        for key in (written[0], written[len(written) // 2], written[-1]):  # every acknowledged write reads back
            assert stub.Get(pb.GetRequest(key=key), timeout=30).value == value
        with pytest.raises(grpc.RpcError) as again:
            stub.Put(pb.PutRequest(key=b"one-more", value=b"x"), timeout=30)
        assert again.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert cluster.stop("a", 0) == 0
        # Fill what is left, then restart on the still-full disk: a one-line refusal, before listening.
        with contextlib.suppress(OSError), (directory / "filler").open("wb") as filler:
            while True:
                filler.write(bytes(64 * 1024))
                filler.flush()
        status, stderr = cluster.run_to_exit("a", 0, "--disk-reserve-mb", "6", timeout_s=30)
        assert_one_line_refusal(status, stderr, 1, "no space left")


def test_repair_needs_a_data_directory(stored: tuple[DurableCluster, Path, Path]) -> None:
    cluster, _, _ = stored
    in_memory = ("--data-dir", str(cluster.data_dir("a", 0)))
    command = [arg for arg in cluster.command("a", 0, "--repair") if arg not in in_memory] + ["--in-memory"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2 and "--repair rebuilds a --data-dir" in result.stderr


def test_okapi_up_repair_rebuilds_a_lost_data_directory(tmp_path: Path) -> None:
    base = free_port_range(2)
    up = [sys.executable, "-m", "okapikv.cli", "up", "--dcs", "a,b", "--partitions", "1", "--wan", "off",
          "--base-port", str(base)]
    environment = dict(os.environ, OKAPI_HOME=str(tmp_path))
    first, second = f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"
    with _launched(up, environment):
        with Client(first, timeout_s=30) as client:
            client.put("kept", "by b")
        with Client(second, timeout_s=30) as client:
            wait_for(lambda: client.get("kept") == b"by b", 30, "the write reaching b")
    shutil.rmtree(tmp_path / "okapi-data" / "a-p0")  # a's disk is replaced by an empty one
    with _launched([*up, "--repair"], environment), Client(first, timeout_s=30) as client:
        assert client.get("kept") == b"by b"


@contextlib.contextmanager
def _launched(command: list[str], environment: dict[str, str]) -> Iterator[None]:
    """`okapi up` until its ready line, stopped with SIGINT at the end."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment)
    try:
        assert process.stdout is not None
        output = []
        deadline = time.monotonic() + 60
        while READY_LINE not in output and time.monotonic() < deadline and process.poll() is None:
            output.append(process.stdout.readline().rstrip("\n"))
        assert READY_LINE in output, "\n".join(output)
        yield
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
