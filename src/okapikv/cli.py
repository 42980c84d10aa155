"""The one ``okapi`` command. Each subcommand's arguments are defined here (its documented
interface); the work lives in the module named next to it, imported only when that subcommand
runs so ``okapi --help`` stays fast."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from okapikv.core.config import DEFAULT_IDLE_INTERVAL_US
from okapikv.core.deployment import PAPER_DC_NAMES
from okapikv.core.skew import DC_MAJOR, SKEW_MODELS, UNIFORM

DEFAULT_DCS = ",".join(PAPER_DC_NAMES)
#: `okapi client --timeout-s`: how long an operation keeps retrying while its server is down. Long,
#: because the course's project 2 kills and restarts servers under a running client, which must
#: carry on once they are back rather than print a line outside the protocol (``ERROR unavailable``).
CLIENT_TIMEOUT_S = 600.0


def _add_cluster_shape(p: argparse.ArgumentParser) -> None:
    """The flags that shape a cluster, shared by `okapi up` and `okapi deploy`."""
    p.add_argument("--dcs", default=DEFAULT_DCS, help="comma-separated DC names (default: %(default)s)")
    p.add_argument("--partitions", type=int, default=2, help="partitions per DC (default: %(default)s)")
    p.add_argument("--protocol", default="okapi", help="okapi | cure | gentlerain | eventual (default: %(default)s)")
    wan = p.add_mutually_exclusive_group()
    wan.add_argument("--wan-ms", type=float, default=None, help="one uniform one-way WAN delay between DCs, in ms")
    wan.add_argument("--wan", choices=["off", "realistic"], default="realistic",
                     help="'off' for no WAN delay; 'realistic' (default) emulates the paper's AWS regions")


def _add_up(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("up", help="start a local multi-DC cluster (one process per partition server)")
    _add_cluster_shape(p)
    p.add_argument("--clock-skew-ms", type=float, default=0.0,
                   help="fixed clock offsets of up to X ms across the servers, as --clock-skew-model lays them out")
    p.add_argument("--clock-skew-model", choices=SKEW_MODELS, default=DC_MAJOR,
                   help="dc-major (default): spread evenly over [0, X] in DC-major order; uniform: independent "
                        "per server in [0, X]; half-normal: independent |N(0, X)| (docs/operations.md)")
    p.add_argument("--clock-skew-seed", type=int, default=1,
                   help="the seed of the uniform and half-normal offsets (default %(default)s)")
    p.add_argument("--heartbeat-ms", type=float, default=None,
                   help="heartbeat after this long without replication (paper: 1; default 5 because every "
                        "local server shares this machine's cores); given without --idle-after-ms, it also "
                        "turns the idle pacing off (the paper's setting)")
    p.add_argument("--stabilization-ms", type=float, default=5.0, help="stabilization period (paper: 5)")
    p.add_argument("--idle-after-ms", type=float, default=None,
                   help="after this long without a write, rounds and heartbeats run every --idle-interval-ms "
                        "until the next write (default 1000; 0: never back off)")
    p.add_argument("--idle-interval-ms", type=float, default=DEFAULT_IDLE_INTERVAL_US / 1000,
                   help="the period of rounds and heartbeats while idle (default %(default)s)")
    p.add_argument("--base-port", type=int, default=7100,
                   help="first port; servers use consecutive ports (default %(default)s)")
    p.add_argument("--host", default="127.0.0.1", help="address the servers bind to (default %(default)s)")
    p.add_argument("--print-config", action="store_true", help="print the cluster config (TOML) and exit")
    storage = p.add_mutually_exclusive_group()
    storage.add_argument("--data-dir", default=None,
                         help="keep each server's data in DATA_DIR/<dc>-p<n> (default: ./okapi-data, or "
                              "$OKAPI_HOME/okapi-data when OKAPI_HOME is set); a restart recovers it")
    storage.add_argument("--in-memory", action="store_true",
                         help="keep no data on disk (benchmarks): a restarted server loses its writes")
    p.add_argument("--repair", action="store_true",
                   help="start every server with --repair: one whose data directory is damaged, lost committed "
                        "writes or is empty rebuilds it from its replicas (docs/operations.md)")
    p.add_argument("--restart-budget", type=int, default=5, metavar="N",
                   help="restart a server that dies with its own command line, at most N times in 60 s "
                        "(default %(default)s; 0: never; docs/operations.md)")
    p.add_argument("--metrics-base-port", type=int, default=0,
                   help="serve Prometheus metrics on consecutive ports from this one (default 0: off)")
    p.add_argument("--resp", action=argparse.BooleanOptionalAction, default=True,
                   help="serve the Redis protocol (RESP2/RESP3) on every server (default: on; --no-resp: off)")
    p.add_argument("--resp-base-port", type=int, default=None,
                   help="RESP ports are consecutive from this one (default: right after the servers' ports)")
    p.add_argument("--log-format", choices=["text", "json"], default=None, help="server log lines as text or JSON")
    p.add_argument("--tls-ca", default=None, help="TLS: CA certificate (PEM) that signs every certificate")
    p.add_argument("--tls-cert", default=None, help="TLS: server certificate (PEM; serverAuth and clientAuth)")
    p.add_argument("--tls-key", default=None, help="TLS: the certificate's private key (PEM)")
    p.add_argument("--tls-server-name", default=None, help="TLS: host name the certificate names, if not --host")
    p.add_argument("--no-tls-client-auth", dest="tls_client_auth", action="store_false",
                   help="TLS: let clients connect without a certificate (peers still use mutual TLS)")
    p.set_defaults(target="okapikv.cluster.launcher:run_up")


def _add_server(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    # Each identity flag defaults to an environment variable (images are configured that way); a flag wins.
    p = sub.add_parser("server", help="run one partition server from a cluster config file")
    _add_env_default(p, "--config", "OKAPI_CONFIG", help="cluster config file (TOML), see `okapi up --print-config`")
    _add_env_default(p, "--dc", "OKAPI_DC", help="the DC name of this server")
    _add_env_default(p, "--partition", "OKAPI_PARTITION", type=int, help="the partition number of this server")
    storage = p.add_mutually_exclusive_group()
    storage.add_argument("--data-dir", default=os.environ.get("OKAPI_DATA_DIR") or None,
                         help="keep the data in this directory (SQLite, recovered at start; default "
                              "$OKAPI_DATA_DIR); one of --data-dir and --in-memory is required")
    storage.add_argument("--in-memory", action="store_true",
                         help="keep no data on disk (benchmarks, tests), even with $OKAPI_DATA_DIR set: a restart "
                              "loses this server's data and fetches it back from its replicas before serving")
    p.add_argument("--repair", action="store_true",
                   help="if the data directory is damaged, lost committed writes or is empty (a new disk), "
                        "rebuild it from the replicas instead of refusing to start (docs/operations.md)")
    p.add_argument("--integrity-check", choices=["quick", "full", "off"], default="quick",
                   help="SQLite structure check at start: quick (default), full (slower), off; "
                        "row checksums are verified in every mode")
    p.add_argument("--disk-reserve-mb", type=float, default=None,
                   help="MiB kept in reserve for a full disk (default: 16, at most 5%% of the file system)")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="serve Prometheus metrics on this port (0: off; default: the config's metrics_port)")
    p.add_argument("--log-format", choices=["text", "json"], default=None,
                   help="one event per line as text (default) or JSON ($OKAPI_LOG_FORMAT)")
    p.add_argument("--loop-stall-ms", type=float, default=50.0,
                   help="log and count (okapi_event_loop_stalls_total) whatever holds the event loop "
                        "longer than this (default %(default)g; 0: off)")
    p.set_defaults(target="okapikv.serve.main:run_server")


def _add_env_default(p: argparse.ArgumentParser, flag: str, variable: str, **options: object) -> None:
    """A flag that defaults to ``$variable`` and is required only while that is unset or empty."""
    value = os.environ.get(variable) or None
    help_text = f"{options.pop('help')} (default ${variable})"
    p.add_argument(flag, default=value, required=value is None, help=help_text, **options)  # type: ignore[arg-type]


def _add_health(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("health", help="exit 0 when a server serves, else 1 with one line saying why (probes)")
    p.add_argument("--connect", default=None, metavar="HOST:PORT",
                   help="the server to check (default: this host's server, from $OKAPI_CONFIG, $OKAPI_DC and "
                        "$OKAPI_PARTITION or --config/--dc/--partition)")
    p.add_argument("--config", default=os.environ.get("OKAPI_CONFIG") or None,
                   help="cluster config file (default $OKAPI_CONFIG): its [tls] and the server's bind address")
    p.add_argument("--dc", default=os.environ.get("OKAPI_DC") or None, help="with --config: the DC (default $OKAPI_DC)")
    p.add_argument("--partition", type=int, default=os.environ.get("OKAPI_PARTITION") or None,
                   help="with --config: the partition (default $OKAPI_PARTITION)")
    p.add_argument("--timeout-s", type=float, default=3.0, help="give up after this long (default %(default)g s)")
    p.add_argument("--tls-ca", default=None, help="TLS: CA certificate (PEM); default: the config's [tls]")
    p.add_argument("--tls-cert", default=None, help="TLS: client certificate (PEM), when the server demands one")
    p.add_argument("--tls-key", default=None, help="TLS: the client certificate's key (PEM)")
    p.add_argument("--tls-server-name", default=None, help="TLS: host name the server certificate names")
    p.set_defaults(target="okapikv.cluster.health:run_health")


def _add_deploy(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("deploy", help="write a compose project or Kubernetes manifests for a cluster (docs/deploy.md)")
    p.add_argument("platform", choices=["compose", "k8s"], help="compose: a compose project; k8s: Kubernetes manifests")
    p.add_argument("--out", default=None, help="directory to write (default okapi-compose or okapi-k8s)")
    p.add_argument("--config", default=None, help="take the cluster's settings from this config file instead")
    _add_cluster_shape(p)
    p.add_argument("--heartbeat-ms", type=float, default=None, help="heartbeat interval (default 5, as okapi up)")
    p.add_argument("--stabilization-ms", type=float, default=5.0, help="stabilization period (default 5)")
    p.add_argument("--cluster-id", default="okapi-local", help="the cluster id peers check (default %(default)s)")
    p.add_argument("--image", default="okapikv:latest", help="the server image (default %(default)s; Dockerfile)")
    p.add_argument("--storage-gib", type=int, default=10, help="k8s: each server's data volume (default 10 GiB)")
    p.add_argument("--tls", action="store_true",
                   help="mutual TLS with one certificate naming --tls-server-name: compose mounts ./tls "
                        "(ca.crt, tls.crt, tls.key), k8s the Secret okapi-tls")
    p.add_argument("--tls-server-name", default="okapi", help="with --tls: the name the certificate names "
                                                              "(default %(default)s)")
    p.set_defaults(target="okapikv.deploy.command:run_deploy")


def _add_client(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("client", help="stdin/stdout client (PUT/SWAP/GET/DELETE/SCAN/TX/STOP)")
    p.add_argument("--dc", default=None,
                   help="DC of the default local cluster to talk to (default: the first); a,b,...: "
                        "fall back to b (then ...) when a stays unreachable")
    p.add_argument("--connect", default=None, metavar="HOST:PORT",
                   help="any server of the DC to use; H1:P1,H2:P2,...: servers of fallback DCs")
    p.add_argument("--timeout-s", type=float, default=CLIENT_TIMEOUT_S,
                   help="retry an operation whose server is down for up to this long, then print "
                        "'ERROR unavailable' (default %(default)g s)")
    p.add_argument("--wait-s", type=float, default=0.0,
                   help="at start-up, keep trying a server that refuses connections for this long "
                        "(default 0: fail at once)")
    p.add_argument("--tls-ca", default=None, help="TLS: CA certificate (PEM); default: the local cluster's [tls]")
    p.add_argument("--tls-cert", default=None, help="TLS: client certificate (PEM), when the cluster demands one")
    p.add_argument("--tls-key", default=None, help="TLS: the client certificate's key (PEM)")
    p.add_argument("--timestamps", action="store_true",
                   help="end PUT/SWAP/DELETE result lines in ' ts=<n>', the write's server timestamp "
                        "(not the course format; used by okapi fuzz)")
    p.add_argument("--counters", action="store_true",
                   help="piped: accept INCR k and PUTEX k v ms too (not the course format; used by okapi fuzz)")
    p.add_argument("--at-most-once", action="store_true",
                   help="do not retry a PUT/SWAP/DELETE whose connection broke after it was sent (a retry "
                        "could apply it twice): answer 'ERROR outcome unknown: ...', a line outside the "
                        "course protocol (for checkers such as okapi fuzz)")
    p.add_argument("--grpc-only", action="store_true",
                   help="talk to the servers over gRPC only, not over their native ports (slower)")
    p.set_defaults(target="okapikv.client.stdio:run_client")


def _add_load(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("load", help="bulk-load records from a file into a cluster (docs/operations.md, Loading data)")
    p.add_argument("file", help="input file, one record a line ('-': stdin)")
    p.add_argument("--format", choices=["tsv", "put"], default="tsv",
                   help="tsv: key<TAB>value lines (default); put: the course's 'PUT <key> <value>' lines")
    p.add_argument("--dc", default=None, help="DC of the default local cluster to load into (default: the first)")
    p.add_argument("--connect", default=None, metavar="HOST:PORT", help="any server of the DC to load into")
    p.add_argument("--batch", type=int, default=2_000, help="PUTs per batch sent to a server (default %(default)s)")
    p.add_argument("--chunk", type=int, default=100_000,
                   help="records read, checked and sent at a time (bounds memory; default %(default)s)")
    p.add_argument("--timeout-s", type=float, default=30.0,
                   help="fail when no record is acknowledged for this long (default %(default)g s)")
    p.add_argument("--grpc-only", action="store_true", help="send over gRPC streams, not the servers' native ports")
    p.add_argument("--tls-ca", default=None, help="TLS: CA certificate (PEM); default: the local cluster's [tls]")
    p.add_argument("--tls-cert", default=None, help="TLS: client certificate (PEM), when the cluster demands one")
    p.add_argument("--tls-key", default=None, help="TLS: the client certificate's key (PEM)")
    p.set_defaults(target="okapikv.client.load_file:run_load")


def _add_status(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("status", help="show every server of a cluster and how far its USV lags")
    p.add_argument("--connect", default=None, metavar="HOST:PORT", help="any server (default: the local cluster)")
    p.add_argument("--config", default=None, help="cluster config file instead of --connect")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.add_argument("--watch", type=float, nargs="?", const=1.0, default=None, metavar="SECONDS",
                   help="refresh the table every SECONDS (default 1) until interrupted")
    p.add_argument("--tls-ca", default=None, help="TLS: CA certificate (PEM); default: the config's [tls]")
    p.add_argument("--tls-cert", default=None, help="TLS: client certificate (PEM), when the cluster demands one")
    p.add_argument("--tls-key", default=None, help="TLS: the client certificate's key (PEM)")
    p.add_argument("--tls-server-name", default=None, help="TLS: host name the server certificates name")
    p.set_defaults(target="okapikv.cluster.status:run_status")


def _add_sim(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("sim", help="deterministic simulation of the protocol core, checked")
    p.add_argument("--seed", type=int, default=1, help="the seed of every random choice (default %(default)s)")
    p.add_argument("--seeds", default=None, metavar="A..B", help="sweep seeds A to B inclusive")
    p.add_argument("--dcs", type=int, default=3, help="number of DCs (default %(default)s)")
    p.add_argument("--partitions", type=int, default=None,
                   help="partitions per DC (default 4; --experiment: 32)")
    p.add_argument("--clients", type=int, default=12,
                   help="closed-loop client sessions, spread over the DCs (default %(default)s)")
    p.add_argument("--duration-s", type=float, default=None,
                   help="simulated seconds of the fault phase (default 2; --experiment: 1.0 per run)")
    p.add_argument("--protocol", default="okapi", help="okapi | cure | gentlerain | eventual (default: %(default)s)")
    p.add_argument("--faults", action="store_true",
                   help="inject partitions, crashes (kill -9, restart from disk), pauses, clock steps, slow servers")
    p.add_argument("--clock-skew-ms", type=float, default=0.0,
                   help="fixed clock offsets of up to X ms across the servers, as --clock-skew-model draws them")
    p.add_argument("--clock-skew-model", choices=SKEW_MODELS, default=UNIFORM,
                   help="how offsets are laid out (default %(default)s; docs/benchmarks.md, Clock skew models)")
    p.add_argument("--clock-jumps", action="store_true",
                   help="with --faults: clocks also jump by minutes to hours (a running server's clock ahead; a "
                        "restart with the clock stepped back, fixed at the heal, or ahead)")
    p.add_argument("--silent-links", action="store_true",
                   help="with --faults: replication links between DCs also go silent (drop everything without "
                        "closing); each carries again only once its liveness check declares the connection dead "
                        "and it reconnects and resends (use with --liveness-s)")
    p.add_argument("--membership", action="store_true",
                   help="with --faults: a whole DC is also lost, removed from the membership and brought back "
                        "(docs/protocol.md, Membership)")
    p.add_argument("--new-dc", action="store_true",
                   help="with --faults: the last DC is new; the others start without it and it joins the running "
                        "cluster during the fault phase (docs/protocol.md, A new DC)")
    p.add_argument("--counters-ttls", action="store_true",
                   help="mix INCRs of counters and expiring PUTs/GETs into the workload (checked: docs/simulated.md)")
    p.add_argument("--large-scans", action="store_true",
                   help="with --faults: bursts of whole-range SCANs whose slices cost their servers 25 ms per key; "
                        "each page must be answered, other clients' GETs must not starve, and no read may stay "
                        "pending after the scanners finish or give up (use with --keys-per-partition 128)")
    p.add_argument("--keys-per-partition", type=int, default=0, metavar="N",
                   help="keys per partition (default 32)")
    p.add_argument("--liveness-s", type=float, default=0.0, metavar="S",
                   help="clients run S simulated seconds more after the heal, checked for liveness (every operation "
                        "completes, every write becomes visible in every DC, within bounds)")
    p.add_argument("--history", default=None, metavar="FILE",
                   help="write the history (JSON lines) to FILE, for `okapi check FILE`; sweeps: FILE with {seed}")
    p.add_argument("--workload", choices=["mix", "paper", "write-ratio"], default="mix",
                   help="mix (every operation, default), paper (RO-TX then PUT, alternating), write-ratio")
    p.add_argument("--rotx-partitions", type=int, default=2, help="partitions each RO-TX reads from (default 2)")
    p.add_argument("--write-ratio", type=float, default=None,
                   help="paper workload: probability an operation is a PUT, else a RO-TX (default: alternate)")
    p.add_argument("--think-us", type=int, default=1_000, help="client think time, uniform in [0, X] us")
    p.add_argument("--warmup-s", type=float, default=0.0,
                   help="latency and throughput leave out these first seconds (--experiment: 0.2)")
    p.add_argument("--cost", default=None, metavar="PROFILE",
                   help="turn the cost model on: a profile file (JSON) or a packaged profile's name")
    p.add_argument("--cores", type=int, default=None, help="with --cost: cores per server (default: the profile's)")
    p.add_argument("--blocking", choices=["free", "thread"], default=None,
                   help="with --cost: blocked requests cost nothing (free) or hold one of --threads (thread)")
    p.add_argument("--threads", type=int, default=None, help="with --cost --blocking thread: threads per server")
    p.add_argument("--experiment", default=None,
                   choices=["fig3", "fig4", "fig5", "write-ratio", "visibility", "traffic"],
                   help="run one of the paper's experiments under the cost model (default profile python-quiet), "
                        "written as okapi bench writes results (--out)")
    p.add_argument("--protocols", default="okapi,cure,gentlerain",
                   help="--experiment: the systems compared (also okapi-piggyback)")
    p.add_argument("--rotx-levels", default=None, metavar="P,P,...",
                   help="--experiment fig4|fig5: the RO-TX sizes swept (default fig4 1,2,4,8,16,32; fig5 1,4,16)")
    p.add_argument("--sweep-steps", type=int, default=None,
                   help="--experiment: a peak sweep's steps at most, each doubling the clients (default 8)")
    p.add_argument("--out", default="sim-out", help="--experiment: directory for results.json, CSVs, PNGs, report.md; "
                   "each finished run is kept in its runs.jsonl, and a rerun with the same options resumes from it")
    p.add_argument("--fresh", action="store_true",
                   help="--experiment: start over, dropping the runs --out holds (default: resume from them)")
    p.add_argument("--jobs", type=int, default=1,
                   help="--experiment: run the sweep points in this many processes (default 1; same results)")
    p.set_defaults(target="okapikv.cli:run_sim_command")


def _add_calibrate(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("calibrate", help="measure this machine's costs into a simulator cost profile, or validate one")
    p.add_argument("--out", default="profile.json", help="where to write the profile (default %(default)s)")
    p.add_argument("--name", default="this-vm", help="the profile's name (default %(default)s)")
    p.add_argument("--cores", type=int, default=2, help="cores per server in the profile (default %(default)s)")
    p.add_argument("--duration-s", type=float, default=0.5,
                   help="simulated seconds per timed workload (default %(default)s)")
    p.add_argument("--validate", nargs="+", default=None, metavar="RESULTS_JSON",
                   help="instead: fit --profile on one `okapi bench --workload rotx` run and predict the others")
    p.add_argument("--profile", default="this-vm",
                   help="--validate: the profile (file or packaged name; default %(default)s)")
    p.add_argument("--fit", default="okapi P4 p=2 c=12", help="--validate: the run to fit on (default %(default)r)")
    p.add_argument("--sim-duration-s", type=float, default=2.0,
                   help="--validate: simulated seconds per point (default %(default)s)")
    p.add_argument("--shared-cores", type=int, default=0,
                   help="--validate: model the deployment as one machine of this many cores (default: a core each)")
    p.add_argument("--markdown", default=None, help="--validate: also write the table here")
    p.add_argument("--fitted-out", default=None, help="--validate: write the fitted profile here")
    p.set_defaults(target="okapikv.bench.lab:run_calibrate")


def _add_check(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("check", help="run the consistency checkers on a recorded history")
    p.add_argument("history", help="history file (JSON lines)")
    p.set_defaults(target="okapikv.check.cli:run_check")


def _add_fuzz(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("fuzz", help="drive real `okapi client` processes with the course fuzzer's mix, then check")
    p.add_argument("--clients", type=int, default=3, help="`okapi client` processes (default %(default)s)")
    p.add_argument("--conflict", action="store_true", help="clients share keys")
    p.add_argument("--ops", type=int, default=1000, help="operations per client (default %(default)s)")
    p.add_argument("--dcs", default=None, help="comma-separated DCs to spread clients over (default: one DC)")
    p.add_argument("--connect", default=None, metavar="HOST:PORT", help="use a running cluster")
    p.add_argument("--seed", type=int, default=1, help="the seed of the operation mix (default %(default)s)")
    p.add_argument("--history", default=None, metavar="FILE",
                   help="write the history here (default: $OKAPI_HOME/fuzz/seed<S>.jsonl or ~/.okapi/fuzz/...)")
    p.add_argument("--base-port", type=int, default=None,
                   help="local cluster: first of its consecutive ports (default: drawn, see OKAPI_PORT_RANGE)")
    p.add_argument("--protocol", default=None, help="local cluster: okapi | cure | gentlerain (default: okapi)")
    p.add_argument("--partitions", type=int, default=None, help="local cluster: partitions per DC (default: 2)")
    p.add_argument("--counters-ttls", action="store_true",
                   help="mix in INCRs of shared counters and expiring PUTs (okapi client --counters), checked apart")
    p.add_argument("--kill-partitions", default=None, metavar="P[,P...]",
                   help="local cluster: kill -9 these partitions' servers in every DC after a third of the "
                        "operations, restart them 1 s later, check the history")
    p.set_defaults(target="okapikv.fuzz.command:run_fuzz")


def _add_bench(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    # One line per flag; what each suite runs and why is in docs/benchmarks.md.
    p = sub.add_parser("bench", help="closed-loop benchmarks: YCSB A-F, the paper's workloads")
    p.add_argument("--suite", default=None, choices=["course", "paper", "fast", "scaling", "resp"],
                   help="run a whole suite (docs/benchmarks.md): course, paper, fast, scaling or resp")
    p.add_argument("--workload", default="a",
                   help="without --suite: YCSB a-f, rotx (RO-TX + PUT), or memory (server RSS per key)")
    p.add_argument("--protocols", default=None,
                   help="comma-separated, one fresh cluster each (default okapi; also okapi-piggyback, okapi-bounded)")
    p.add_argument("--clients", default=None,
                   help="comma-separated client counts (closed-loop sessions; scaling suite: per partition)")
    p.add_argument("--duration-s", type=float, default=5.0, help="measured seconds per run")
    p.add_argument("--warmup-s", type=float, default=1.0, help="unmeasured seconds before each run's window")
    p.add_argument("--dcs", default=None, help="comma-separated DC names (default: one DC; rotx and paper: 3)")
    p.add_argument("--partitions", type=int, default=None,
                   help="partitions per DC (default 1; paper suite 4, quick 2; scaling suite: the largest level)")
    p.add_argument("--clock-skew-ms", type=float, default=None,
                   help="clock offsets of up to X ms across servers (default 0; paper suite: 10)")
    p.add_argument("--clock-skew-model", choices=SKEW_MODELS, default=UNIFORM,
                   help="how offsets are laid out (default %(default)s; docs/benchmarks.md, Clock skew models)")
    p.add_argument("--coordinator", choices=("session", "first-key"), default="session",  # client.policy.COORDINATORS
                   help="who coordinates RO-TX and SCAN: session (default: the session's own server) or first-key")
    p.add_argument("--wan", default="realistic", help="'realistic' (the paper's regions), 'off', or one-way ms")
    p.add_argument("--rotx-partitions", type=int, default=2, help="partitions each RO-TX reads from (rotx)")
    p.add_argument("--write-ratio", type=float, default=None,
                   help="rotx: probability an operation is a PUT (default: alternate RO-TX and PUT)")
    p.add_argument("--max-sessions", type=int, default=None,
                   help="paper suite: the most sessions the peak-throughput search doubles to (default 1024; quick 8)")
    p.add_argument("--latency-cap-ms", type=float, default=None,
                   help="paper suite: the peak search stops once mean latency passes this (default 250)")
    p.add_argument("--incr-ratio", type=float, default=0.0,
                   help="probability an operation is an INCR of one of 16 hot counters (default 0)")
    p.add_argument("--ttl-ms", type=int, default=0,
                   help="every write a PUT expiring after this many ms (default 0: none)")
    p.add_argument("--records", type=int, default=10_000, help="records loaded before measuring")
    p.add_argument("--key-bytes", type=int, default=8, help="key size (zero-padded decimal, so order = insertion)")
    p.add_argument("--value-bytes", type=int, default=8, help="value size")
    p.add_argument("--processes", type=int, default=None, help="load processes (default: max(2, cores / 2))")
    p.add_argument("--seed", type=int, default=1, help="the seed of the generated operations")
    p.add_argument("--timeout-s", type=float, default=10.0, help="per-operation client timeout")
    p.add_argument("--visibility-samples", type=int, default=None, help="probes per DC pair (default 200, quick 10)")
    p.add_argument("--no-redis", action="store_true", help="course suite: skip the Redis reference line")
    p.add_argument("--no-progress", action="store_true", help="no live progress bar (summary lines only)")
    p.add_argument("--keep-cpus-busy", action="store_true",
                   help="run a nice-19 spinner per CPU so idle virtual CPUs do not halt (docs/benchmarks.md)")
    p.add_argument("--grpc-only", action="store_true",
                   help="okapi clients pipeline over gRPC streams, not the servers' native ports")
    p.add_argument("--load", choices=["client", "lean"], default="client",
                   help="okapi load generator: the async client's sessions, or 'lean' (YCSB A-C; docs/benchmarks.md)")
    p.add_argument("--durable", action="store_true",
                   help="local servers keep their data on disk, as `okapi up` runs them (default: in memory)")
    p.add_argument("--connect", default=None, metavar="HOST:PORT", help="measure a running cluster instead")
    p.add_argument("--quick", action="store_true", help="a smoke test of under a minute (CI): not a measurement")
    p.add_argument("--out", default="bench-out",
                   help="directory for results.json, CSVs, PNGs, report.md (default %(default)s)")
    p.set_defaults(target="okapikv.bench.lab:run_bench")


def run_sim_command(args: argparse.Namespace) -> int:
    """``okapi sim``: one run or a sweep of seeds (``okapikv.sim.cli``), or with ``--experiment`` one
    of the paper's experiments, written through the bench's results path (the repository's
    ``benchmarks/``, ``okapikv.bench.lab``)."""
    args.partitions_given, args.duration_given = args.partitions is not None, args.duration_s is not None
    if args.experiment is not None:
        from okapikv.bench.lab import run_experiment

        return run_experiment(args)
    from okapikv.sim.cli import run_sim

    args.partitions = 4 if args.partitions is None else args.partitions
    args.duration_s = 2.0 if args.duration_s is None else args.duration_s
    return run_sim(args)


def build_parser() -> argparse.ArgumentParser:
    from okapikv import __version__, compiled
    from okapikv.cluster.membership_args import add_parser as add_dc_parser

    parser = argparse.ArgumentParser(prog="okapi", description="okapikv: a causally consistent geo-replicated store")
    parser.add_argument("--version", action="version", version=f"okapi (okapikv) {__version__}, {compiled.build()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_up, _add_server, _add_health, _add_deploy, _add_client, _add_load, _add_status, _add_sim,
                _add_calibrate, _add_check, _add_fuzz, _add_bench):
        add(sub)
    add_dc_parser(sub)
    return parser


def subcommand_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's own parser, by name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed command line. An argument no parser knows is reported by the subcommand's parser,
    so the usage printed with the error is that subcommand's (a mistyped flag of `okapi up` shows
    `okapi up`'s flags), not the bare top-level usage that plain ``parse_args`` would print."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        subcommand_parsers(parser)[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


#: Optional dependencies, by the extra that installs them (pyproject.toml): a server install has none.
EXTRAS = {"numpy": "check", "matplotlib": "bench", "hdrh": "bench"}


def _missing_extra(command: str, error: ModuleNotFoundError) -> int | None:
    """Exit status 2 with the install command when ``error`` is an optional dependency, else None."""
    root = (error.name or "").split(".")[0]
    if root not in EXTRAS:
        return None
    print(f"okapi {command}: needs {root}, which a server install leaves out: pip install 'okapikv[{EXTRAS[root]}]'",
          file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    module_name, function_name = args.target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and error.name.startswith("okapikv"):
            print(f"okapi {args.command}: not available in this build ({error.name})", file=sys.stderr)
            return 2
        missing = _missing_extra(args.command, error)
        if missing is not None:
            return missing
        raise
    try:
        result: int = getattr(module, function_name)(args)
        sys.stdout.flush()  # here, where a reader that went away is caught, not at exit
    except BrokenPipeError:
        return _reader_gone()
    except ModuleNotFoundError as error:  # a dependency imported where it is first needed
        missing = _missing_extra(args.command, error)
        if missing is None:
            raise
        return missing
    return result


def _reader_gone() -> int:
    """The reader of stdout went away (``okapi status --json | head -c 1500``): stop quietly, as
    Unix tools do, and point stdout at /dev/null so the interpreter's last flush does not fail
    again with a traceback. Exit 141, a shell's status for a command ended by SIGPIPE."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 141


if __name__ == "__main__":
    sys.exit(main())
