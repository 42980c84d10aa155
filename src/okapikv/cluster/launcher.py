"""`okapi up`: start a local multi-DC cluster, one OS process per partition server.

Each server is a real `okapi server` process (``sys.executable -m okapikv.cli server ...``), as it
would run on its own host, reading the same config file; the launcher only writes that file,
starts the processes, waits for every one to pass a gRPC health check, and prints
``okapi: cluster ready``. It then supervises: a server that dies is reported and restarted with
its own command line, at most ``--restart-budget`` times in ``RESTART_WINDOW_S`` (then it stays
down and the launcher prints the command that restarts it by hand), and SIGINT/SIGTERM stops every
server (SIGTERM, then SIGKILL after a grace period). The servers run in process groups of their own,
so Ctrl-C in the terminal reaches only the launcher, which stops and counts them.

One launcher per port (``PortLocks``): a ``flock`` per listening port under
``$OKAPI_HOME/locks``, taken before anything is written or started, so two `okapi up` started at the
same moment cannot both run a cluster on the same ports. Every server's pid is printed next to its
address.

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
import fcntl
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import IO

from okapikv.cluster.config import (
    DEFAULT_IDLE_AFTER_MS,
    DEFAULT_IDLE_INTERVAL_MS,
    LOCAL_HEARTBEAT_INTERVAL_MS,
    ClusterConfig,
    default_config_path,
    local_cluster,
    okapi_home,
    split_address,
)
from okapikv.cluster.health import is_serving
from okapikv.cluster.ports import address_in_use
from okapikv.cluster.processes import (
    STARTUP_TIMEOUT_S,
    Child,
    StartError,
    spawn,
    start_all,
    stop_children,
    wait_started,
)
from okapikv.core.skew import DC_MAJOR
from okapikv.tls import TlsConfig

READY_LINE = "okapi: cluster ready"
#: ``--restart-budget``: restarts of one server allowed within ``RESTART_WINDOW_S``, then it stays down
DEFAULT_RESTART_BUDGET = 5
RESTART_WINDOW_S = 60.0
#: Exit statuses a restart does not fix: a bad config (2) and damaged data (4); docs/deploy.md's
#: systemd unit says the same with RestartPreventExitStatus.
NO_RESTART_STATUSES = (2, 4)


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
    config = local_cluster(
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
    # A server further ahead than the limit has its timestamps refused or clamped by the others
    # (docs/operations.md, "Clocks: the maximum offset"): a mistake, not an experiment.
    ahead = max(server.clock_skew_ms for server in config.servers)
    if ahead > config.max_clock_offset_ms:
        raise ValueError(f"--clock-skew-ms {args.clock_skew_ms:g} puts a server {ahead:g} ms ahead, above the clock "
                         f"offset limit ({config.max_clock_offset_ms:g} ms, max_clock_offset_ms)")
    return config


def listener_addresses(config: ClusterConfig) -> list[str]:
    """Every address the cluster's servers listen on (their own, peer, metrics and RESP ports)."""
    listeners = [server.address for server in config.servers]
    listeners += [server.peer_address for server in config.servers if server.peer_address]
    listeners += [server.metrics_address for server in config.servers if server.metrics_address]
    listeners += [server.resp_address for server in config.servers if config.resp and server.resp_address]
    return listeners


def busy_addresses(config: ClusterConfig) -> list[str]:
    """Addresses some other process already listens on (a cluster still running?)."""
    return [address for address in listener_addresses(config) if address_in_use(*split_address(address))]


DEFAULT_DATA_DIR = "okapi-data"


def default_data_dir() -> Path:
    """``$OKAPI_HOME/okapi-data`` when ``OKAPI_HOME`` is set, else ``./okapi-data``."""
    home = os.environ.get("OKAPI_HOME")
    return (Path(home).expanduser() if home else Path.cwd()) / DEFAULT_DATA_DIR


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


def publish_config(config: ClusterConfig, private: Path) -> tuple[str, Path]:
    """Make ``config`` (running, its servers started from ``private``) the default cluster config,
    unless that describes another cluster that is still running. Returns the line that says where
    the cluster's config is (printed after the ready line, which scripts wait for), and that path
    (the one a restarted server reads)."""
    target = default_config_path()
    owner = running_owner(target, config)
    if owner is not None:
        return (f"{target} describes another running cluster ({owner.servers[0].address}, ...), left as it is; "
                f"this cluster's config is {private} (okapi status --config {private}, okapi client --connect "
                f"{config.servers[0].address})"), private
    config.dump(target)
    private.unlink(missing_ok=True)
    return f"config {target} (okapi client and okapi status find the cluster there)", target


def _report_deaths(children: list[Child], budget: int = 0) -> int:
    """Report servers that exited since the last call, restarting each with its own command line
    while ``budget`` allows (at most that many restarts in ``RESTART_WINDOW_S``; not for an exit
    status in ``NO_RESTART_STATUSES``); returns how many are running."""
    alive = 0
    for child in children:
        code = child.process.poll()
        if code is None:
            alive += 1
        elif not child.reported:
            alive += _restart(child, code, budget)
    return alive


def _restart(child: Child, code: int, budget: int) -> int:
    """Report one server's exit and restart it if allowed; 1 if it runs again, else 0."""
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    what = f"okapi: server {child.server.label} ({child.server.address}, pid {child.process.pid}) {how}"
    now = time.monotonic()
    restarts = child.restarts
    while restarts and now - restarts[0] > RESTART_WINDOW_S:
        restarts.popleft()
    by_hand = f"restart it by hand: {shlex.join(child.command)}" if child.command else ""
    if not child.command or code in NO_RESTART_STATUSES or len(restarts) >= budget:
        child.reported = True
        if not child.command:
            why = ""
        elif code in NO_RESTART_STATUSES:
            why = "; not restarted (a bad config or damaged data: see its error above); " + by_hand
        elif budget == 0:
            why = "; not restarted (--restart-budget 0); " + by_hand
        else:
            why = (f"; NOT RESTARTED: {len(restarts)} restart(s) in the last {RESTART_WINDOW_S:.0f} s "
                   f"(--restart-budget {budget}); find the cause in its log, then " + by_hand)
        print(what + why, file=sys.stderr, flush=True)
        return 0
    restarts.append(now)
    child.process = spawn(child.command)
    print(f"{what}; restarted as pid {child.process.pid} (restart {len(restarts)} of at most {budget} in "
          f"{RESTART_WINDOW_S:.0f} s)", file=sys.stderr, flush=True)
    return 1


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


#: How long a refused launcher waits for the lock's holder to write its pid (it does so right after
#: taking the lock: a launcher started at the same moment can find the lock taken and the file empty).
OWNER_WAIT_S = 2.0


def _owner_of(handle: IO[str]) -> str:
    """The pid written in a lock file held by another launcher, or "unknown" if none appears
    within ``OWNER_WAIT_S``."""
    deadline = time.monotonic() + OWNER_WAIT_S
    while True:
        handle.seek(0)
        owner = handle.read().strip()
        if owner or time.monotonic() >= deadline:
            return owner or "unknown"
        time.sleep(0.02)


class PortLocks:
    """One `okapi up` per port (in one ``OKAPI_HOME``): an exclusive ``flock`` on
    ``$OKAPI_HOME/locks/<port>.lock`` for every port the cluster listens on, taken in port order
    before anything is written or started, held while the launcher lives (the kernel drops it when
    the process dies, even by SIGKILL). Not a check-then-act: two launchers started at the same
    moment cannot both pass, and taking the ports in order means the first port they share decides.
    Each file holds its owner's pid, so the one refused can say who holds the port."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._files: list[IO[str]] = []

    def acquire(self, ports: list[int]) -> str | None:
        """Lock every port, or none: None when done, else why not (the port and its owner)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for port in sorted(set(ports)):
            handle = (self.directory / f"{port}.lock").open("a+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                owner = _owner_of(handle)
                handle.close()
                self.release()
                return f"port {port} belongs to another okapi up (pid {owner}) in {self.directory.parent}"
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            self._files.append(handle)
        return None

    def release(self) -> None:
        for handle in self._files:
            handle.close()
        self._files.clear()


def run_up(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
        budget = getattr(args, "restart_budget", DEFAULT_RESTART_BUDGET)
        if budget < 0:
            raise ValueError("--restart-budget must not be negative (0: never restart)")
    except ValueError as error:
        print(f"okapi up: {error}", file=sys.stderr)
        return 2
    if args.print_config:
        sys.stdout.write(config.to_toml())
        return 0
    locks = PortLocks(okapi_home() / "locks")
    refused = locks.acquire([split_address(address)[1] for address in listener_addresses(config)])
    if refused is not None:
        print(f"okapi up: {refused}: one launcher per cluster (try `okapi status`, stop that one, or pick another "
              "--base-port)", file=sys.stderr)
        return 1
    try:
        return _run_locked(args, config, budget)
    finally:
        locks.release()


def _run_locked(args: argparse.Namespace, config: ClusterConfig, budget: int) -> int:
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
    log_format = getattr(args, "log_format", None)
    repair = bool(getattr(args, "repair", False))
    try:
        wan = "off" if not any(any(row) for row in config.wan_ms) else (
            f"{args.wan_ms} ms" if args.wan_ms is not None else args.wan)
        _say(f"cluster {config.cluster_id}: {len(config.dcs)} DC(s) x {config.partitions} partition(s), "
             f"protocol {config.protocol}, WAN {wan}")
        _say(f"data in {data_root} (kept across restarts)" if data_root is not None else "data in memory only")
        children += start_all(config, path, data_root=data_root, log_format=log_format, repair=repair)
        for child in children:
            server = child.server
            extra = f"  metrics {server.metrics_address}" if server.metrics_address else ""
            if config.resp and server.resp_address:
                extra = f"  resp {server.resp_address}{extra}"
            _say(f"{server.dc:<12} partition {server.partition:<3} {server.address}{extra}  "
                 f"pid {child.process.pid}")
        return _supervise(config, children, stop, path, budget)
    finally:
        running = sum(child.process.poll() is None for child in children)
        stop_children(children)
        if children:
            exited = len(children) - running
            _say(f"stopped {running} server(s)" + (f" ({exited} had already exited)" if exited else ""))
        path.unlink(missing_ok=True)
        for number, handler in previous.items():
            signal.signal(number, handler)


def _supervise(config: ClusterConfig, children: list[Child], stop: StopFlag, private: Path, budget: int) -> int:
    try:
        wait_started(config, children, STARTUP_TIMEOUT_S, give_up=lambda: "interrupted" if stop.is_set() else None,
                     tls=config.tls.client_side() if config.tls is not None else None)
    except StartError as error:
        if stop.is_set():
            _say("interrupted; stopping")
            return 0
        print(f"okapi up: {error} during start-up; stopping the cluster", file=sys.stderr)
        return 1
    where, config_path = publish_config(config, private)
    if config_path != private:  # restarts read the published config (the private copy is gone)
        for child in children:
            child.command = [str(config_path) if part == str(private) else part for part in child.command]
    print(READY_LINE, flush=True)
    _say(where)
    while not stop.wait(0.25):
        if _report_deaths(children, budget) == 0:
            print("okapi up: every server has exited", file=sys.stderr)
            return 1
    _say("stopping the cluster")
    return 0
