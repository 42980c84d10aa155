"""`okapi up`: start a local multi-DC cluster, one OS process per partition server.

Each server is a real `okapi server` process (``sys.executable -m okapikv.cli server ...``), as it
would run on its own host, reading the same config file; the launcher only writes that file,
starts the processes, waits for every one to pass a gRPC health check, and prints
``okapi: cluster ready``. It then supervises: a server that dies is reported (the rest keep
running), and SIGINT/SIGTERM stops every server (SIGTERM, then SIGKILL after a grace period).

The config goes to ``default_config_path()`` (``$OKAPI_HOME/cluster.toml`` or
``~/.okapi/cluster.toml``) so that `okapi client` and `okapi status` find the cluster without flags,
but only once the cluster is ready, and never over the config of another cluster that still runs
(``publish_config``): until then the servers read a copy of their own (``cluster.<pid>.toml`` in the
same folder, removed when the launcher exits). An `okapi up` that fails (ports or data directory in
use, a server that does not start) so leaves the running cluster findable, and a second cluster
started beside a running one says where its own config is.
On Linux the servers are also told to exit if the launcher dies without cleaning up
(``PR_SET_PDEATHSIG``, ``okapikv.lifetime``), so a killed launcher leaves no orphans holding the ports.

Data: each server keeps its store in ``DATA_DIR/<dc>-p<n>`` (``--data-dir``; by default
``./okapi-data``, or ``$OKAPI_HOME/okapi-data`` when ``OKAPI_HOME`` is set, so a cluster and its data
live together), and a restarted cluster recovers it. ``--in-memory`` keeps nothing on disk
(benchmarks). A server refuses a directory holding another server's data (other DC, partition,
cluster shape or protocol) and says so, and one whose data is damaged (exit status 4); ``--repair``
starts every server in repair mode, so those rebuild their data from their replicas instead
(docs/operations.md, "Storage integrity and replacing a disk").

Redis protocol: every server serves a RESP port (``okapikv.resp``) on consecutive ports from
``--resp-base-port``, by default the ports right after the servers' own (and after their peer
listeners, when they have any), printed next to each server; ``--no-resp`` turns them off.

Optional: ``--metrics-base-port`` gives every server a Prometheus endpoint (consecutive ports in
the servers' order); ``--tls-ca/--tls-cert/--tls-key`` write a ``[tls]`` section (one certificate
for every local server, so it must name the ``--host`` address); ``--print-config`` prints the
config it would run, the starting point of a multi-host deployment (docs/deploy.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from okapikv.cluster.config import (
    DEFAULT_IDLE_AFTER_MS,
    DEFAULT_IDLE_INTERVAL_MS,
    LOCAL_HEARTBEAT_INTERVAL_MS,
    ClusterConfig,
    ServerConfig,
    default_config_path,
    local_cluster,
    okapi_home,
    split_address,
)
from okapikv.cluster.health import is_serving, wait_until_serving
from okapikv.core.skew import DC_MAJOR
from okapikv.lifetime import child_environment
from okapikv.tls import TlsConfig

READY_LINE = "okapi: cluster ready"
STARTUP_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0


@dataclass
class Child:
    server: ServerConfig
    process: subprocess.Popen[bytes]
    reported: bool = False


def _say(message: str) -> None:
    print(f"okapi: {message}", flush=True)


def _tls_from_args(args: argparse.Namespace) -> TlsConfig | None:
    paths = [getattr(args, name, None) for name in ("tls_ca", "tls_cert", "tls_key")]
    if not any(paths):
        return None
    if not all(paths):
        raise ValueError("TLS needs all of --tls-ca, --tls-cert and --tls-key")
    ca, certificate, key = (str(Path(str(path)).expanduser().resolve()) for path in paths)
    return TlsConfig(ca, certificate, key, client_auth=getattr(args, "tls_client_auth", True),
                     server_name=getattr(args, "tls_server_name", None))


def config_from_args(args: argparse.Namespace) -> ClusterConfig:
    wan: float | str = args.wan_ms if args.wan_ms is not None else args.wan
    dcs = [name.strip() for name in args.dcs.split(",") if name.strip()]
    if not dcs:
        raise ValueError("--dcs must name at least one DC")
    tls = _tls_from_args(args)
    resp = getattr(args, "resp", True)
    resp_base_port = getattr(args, "resp_base_port", None)
    if resp and resp_base_port is None:  # right after the servers' ports (and their peer listeners)
        servers = len(dcs) * args.partitions
        resp_base_port = args.base_port + servers * (2 if tls is not None and not tls.client_auth else 1)
    # An explicit heartbeat period asks for that cadence: no idle pacing unless asked for as well.
    heartbeat_ms = getattr(args, "heartbeat_ms", None)
    idle_after_ms = getattr(args, "idle_after_ms", None)
    if idle_after_ms is None:
        idle_after_ms = DEFAULT_IDLE_AFTER_MS if heartbeat_ms is None else 0.0
    return local_cluster(
        dcs=dcs,
        partitions=args.partitions,
        protocol=args.protocol,
        wan=wan,
        clock_skew_ms=args.clock_skew_ms,
        clock_skew_model=getattr(args, "clock_skew_model", DC_MAJOR),
        clock_skew_seed=getattr(args, "clock_skew_seed", 1),
        heartbeat_interval_ms=LOCAL_HEARTBEAT_INTERVAL_MS if heartbeat_ms is None else heartbeat_ms,
        stabilization_interval_ms=getattr(args, "stabilization_ms", 5.0),
        idle_after_ms=idle_after_ms,
        idle_interval_ms=getattr(args, "idle_interval_ms", DEFAULT_IDLE_INTERVAL_MS),
        base_port=args.base_port,
        host=args.host,
        metrics_base_port=getattr(args, "metrics_base_port", 0) or 0,
        tls=tls,
        resp=resp,
        resp_base_port=resp_base_port or 0,
    )


def busy_addresses(config: ClusterConfig) -> list[str]:
    """Addresses some other process already listens on (a cluster still running?)."""
    busy = []
    listeners = [server.address for server in config.servers]
    listeners += [server.peer_address for server in config.servers if server.peer_address]
    listeners += [server.metrics_address for server in config.servers if server.metrics_address]
    listeners += [server.resp_address for server in config.servers if config.resp and server.resp_address]
    for address in listeners:
        host, port = split_address(address)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError:
                busy.append(address)
    return busy


DEFAULT_DATA_DIR = "okapi-data"


def default_data_dir() -> Path:
    """``$OKAPI_HOME/okapi-data`` when ``OKAPI_HOME`` is set, else ``./okapi-data``."""
    home = os.environ.get("OKAPI_HOME")
    return (Path(home).expanduser() if home else Path.cwd()) / DEFAULT_DATA_DIR


def server_data_dir(root: Path, server: ServerConfig) -> Path:
    """The data directory of one server under the cluster's data root: ``<dc>-p<n>``."""
    return root / f"{server.dc}-p{server.partition}"


def start_server(
    config_path: Path, server: ServerConfig, log_format: str | None = None, data_dir: Path | None = None,
    repair: bool = False,
) -> subprocess.Popen[bytes]:
    """Start one `okapi server` process (in memory unless ``data_dir`` is given; ``repair``: in
    repair mode)."""
    command = [
        sys.executable, "-m", "okapikv.cli", "server",
        "--config", str(config_path), "--dc", server.dc, "--partition", str(server.partition),
    ]
    if data_dir is not None:
        command += ["--data-dir", str(data_dir)]
        if repair:
            command.append("--repair")
    else:
        command.append("--in-memory")
    if log_format:
        command += ["--log-format", log_format]
    environment = child_environment()  # the server ends with this process (okapikv.lifetime)
    environment.setdefault("OKAPI_LOG_LEVEL", "WARNING")  # the launcher prints the endpoints itself
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, env=environment)


def running_owner(path: Path, mine: ClusterConfig) -> ClusterConfig | None:
    """The other cluster that the config at ``path`` describes, if any of its servers answers a
    health check; None when there is no such config, it is unreadable, it is ``mine`` (the same
    addresses: ``mine`` holds them now), or none of its servers runs."""
    try:
        current = ClusterConfig.load(path)
    except ValueError:
        return None
    if [s.address for s in current.servers] == [s.address for s in mine.servers]:
        return None
    try:
        tls = current.tls.client_side() if current.tls is not None else None
        if any(is_serving(server.address, timeout_s=0.5, tls=tls) for server in current.servers):
            return current
    except (OSError, ValueError):  # its TLS files are gone: no client of that config could reach it either
        return None
    return None


def publish_config(config: ClusterConfig, private: Path) -> str:
    """Make ``config`` (running, its servers started from ``private``) the default cluster config,
    unless that describes another cluster that is still running. Returns the line that says where
    the cluster's config is (printed after the ready line, which scripts wait for)."""
    target = default_config_path()
    owner = running_owner(target, config)
    if owner is not None:
        return (f"{target} describes another running cluster ({owner.servers[0].address}, ...), left as it is; "
                f"this cluster's config is {private} (okapi status --config {private}, okapi client --connect "
                f"{config.servers[0].address})")
    config.dump(target)
    private.unlink(missing_ok=True)
    return f"config {target} (okapi client and okapi status find the cluster there)"


def stop_children(children: list[Child], grace_s: float = STOP_GRACE_S) -> None:
    for child in children:
        if child.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.process.terminate()
    deadline = time.monotonic() + grace_s
    for child in children:
        try:
            child.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait()


def _report_deaths(children: list[Child]) -> int:
    """Report servers that exited since the last call; returns how many are still running."""
    alive = 0
    for child in children:
        code = child.process.poll()
        if code is None:
            alive += 1
        elif not child.reported:
            child.reported = True
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            print(f"okapi: server {child.server.label} ({child.server.address}) {how}", file=sys.stderr, flush=True)
    return alive


class StopFlag:
    """Set by the SIGINT / SIGTERM handler, polled by the supervising loop.

    Not a ``threading.Event``: a signal handler runs in the main thread between two bytecodes, and
    one that arrives while the main thread is inside ``Event.wait`` (holding the event's lock) would
    block forever in ``Event.set`` on that same lock, and ``okapi up`` would never stop."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout_s: float) -> bool:
        """Sleep up to ``timeout_s`` (a signal's handler runs during the sleep); whether it is set."""
        if not self._set:
            time.sleep(timeout_s)
        return self._set


def run_up(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ValueError as error:
        print(f"okapi up: {error}", file=sys.stderr)
        return 2
    if args.print_config:
        sys.stdout.write(config.to_toml())
        return 0
    busy = busy_addresses(config)
    if busy:
        print(f"okapi up: address(es) already in use: {', '.join(busy)} (another cluster running? "
              "try `okapi status`, or pick another --base-port)", file=sys.stderr)
        return 1
    # The servers start from a private copy: the default config changes only once they are ready.
    path = config.dump(okapi_home() / f"cluster.{os.getpid()}.toml")

    stop = StopFlag()

    def on_signal(signal_number: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {number: signal.signal(number, on_signal) for number in (signal.SIGINT, signal.SIGTERM)}
    children: list[Child] = []
    data_root: Path | None = None
    if not getattr(args, "in_memory", False):
        given = getattr(args, "data_dir", None)
        data_root = (Path(given).expanduser() if given else default_data_dir()).resolve()
    try:
        wan = "off" if not any(any(row) for row in config.wan_ms) else (
            f"{args.wan_ms} ms" if args.wan_ms is not None else args.wan)
        _say(f"cluster {config.cluster_id}: {len(config.dcs)} DC(s) x {config.partitions} partition(s), "
             f"protocol {config.protocol}, WAN {wan}")
        _say(f"data in {data_root} (kept across restarts)" if data_root is not None else "data in memory only")
        for server in config.servers:
            server_dir = server_data_dir(data_root, server) if data_root is not None else None
            children.append(Child(server, start_server(path, server, getattr(args, "log_format", None), server_dir,
                                                       repair=bool(getattr(args, "repair", False)))))
            extra = f"  metrics {server.metrics_address}" if server.metrics_address else ""
            if config.resp and server.resp_address:
                extra = f"  resp {server.resp_address}{extra}"
            _say(f"{server.dc:<12} partition {server.partition:<3} {server.address}{extra}")
        return _supervise(config, children, stop, path)
    finally:
        running = sum(child.process.poll() is None for child in children)
        stop_children(children)
        if children:
            exited = len(children) - running
            _say(f"stopped {running} server(s)" + (f" ({exited} had already exited)" if exited else ""))
        path.unlink(missing_ok=True)
        for number, handler in previous.items():
            signal.signal(number, handler)


def _supervise(config: ClusterConfig, children: list[Child], stop: StopFlag, private: Path) -> int:
    def startup_problem() -> str | None:
        if stop.is_set():
            return "interrupted"
        for child in children:
            code = child.process.poll()
            if code is not None:
                return f"server {child.server.label} ({child.server.address}) exited with code {code} during start-up"
        return None

    try:
        not_ready = wait_until_serving([s.address for s in config.servers], STARTUP_TIMEOUT_S,
                                       give_up=startup_problem,
                                       tls=config.tls.client_side() if config.tls is not None else None)
    except RuntimeError as error:
        if stop.is_set():
            _say("interrupted; stopping")
            return 0
        print(f"okapi up: {error}; stopping the cluster", file=sys.stderr)
        return 1
    if not_ready:
        print(f"okapi up: no health from {', '.join(not_ready)} after {STARTUP_TIMEOUT_S:.0f} s; stopping",
              file=sys.stderr)
        return 1
    where = publish_config(config, private)
    print(READY_LINE, flush=True)
    _say(where)
    while not stop.wait(0.25):
        if _report_deaths(children) == 0:
            print("okapi up: every server has exited", file=sys.stderr)
            return 1
    _say("stopping the cluster")
    return 0
