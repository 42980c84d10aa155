"""The layers of okapikv: which package may import which, and no import circles (docs/design.md,
"Layers").

Every module under ``src/okapikv`` is parsed (never imported) and every import in it counts, wherever
it stands: at module level, inside a function, and under ``if TYPE_CHECKING``. A function-level
import is a dependency that is only paid later (the function cannot run without the other module),
and a TYPE_CHECKING import is a dependency of the code's meaning (its types are the other module's):
either way the two modules cannot be changed or understood apart, so both are arrows of the graph,
for the layer rules and for circles alike. ``importlib.import_module("okapikv....")`` and
``__import__`` with a constant name count too. ``from package import name`` is an arrow to the
module ``package.name`` when there is one, else to the package. The ``okapi`` command's dispatch by
name (``okapikv.cli``, "module:function" strings) is not followed: the command may import
everything.

A module belongs to the longest entry of ``LAYERS`` that names it or a package above it (the entry
``okapikv`` names the package's own ``__init__`` only). An import is allowed inside its entry and
into the entries its row lists (a row may name a single module of another entry, e.g. the
stdin/stdout client's use of the cluster config). The table itself is a DAG, so the package graph
has no circle; circles between modules (inside one package too) are checked separately.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest
from import_graph import circles, entry_graph, entry_of, import_graph, layer_violations, within

SRC = Path(__file__).resolve().parents[2] / "src"

CORE = "okapikv.core"
#: Leaf modules of their own: library errors, TLS settings, TCP socket options, child processes
#: that end with their parent, which modules run compiled.
LEAVES = {"okapikv.errors", "okapikv.tls", "okapikv.tcp", "okapikv.lifetime", "okapikv.compiled"}
CLIENT_BELOW = {CORE, "okapikv.wire", *LEAVES}
SERVER_BELOW = {CORE, "okapikv.wire", "okapikv.storage", "okapikv.cluster", *LEAVES}

#: entry -> what its modules may import besides the entry itself.
LAYERS: dict[str, set[str]] = {
    CORE: set(),  # pure: no I/O, clock or randomness (also tests/unit/test_core_purity.py)
    **{leaf: set() for leaf in LEAVES},
    "okapikv.check": {CORE},  # pure functions of a history
    "okapikv.sim": {CORE, "okapikv.check"},  # the simulator drives the core and checks the history
    "okapikv.wire": {CORE},  # protobuf <-> core messages, framing
    "okapikv.storage": {CORE, "okapikv.lifetime"},  # durable state of one partition server (its checkpoint process)
    "okapikv.cluster": {CORE, "okapikv.wire", "okapikv.tls", "okapikv.lifetime"},  # config, launcher, status
    "okapikv.deploy": {"okapikv.cluster", "okapikv.tls"},  # compose files and manifests rendered from a cluster config
    "okapikv.client": CLIENT_BELOW,  # never the server, never the cluster package
    # ``okapi client`` finds the local cluster from its config file, and checks that its address
    # speaks gRPC (``okapikv.cluster.probe``), and uses nothing else of cluster/
    "okapikv.client.stdio": {*CLIENT_BELOW, "okapikv.client", "okapikv.cluster.config", "okapikv.cluster.probe"},
    "okapikv": {"okapikv.client"},  # the package: __version__, Client and AsyncClient (lazily)
    "okapikv.server": SERVER_BELOW,  # never a client, never the RESP port
    # the RESP port: a listener of the server that forwards through the client library
    "okapikv.resp": {*SERVER_BELOW, "okapikv", "okapikv.server", "okapikv.client"},
    # the composition root: a server process is assembled from its listeners, the RESP port among
    # them, above both (the server package never imports the RESP port)
    "okapikv.serve": {*SERVER_BELOW, "okapikv.server", "okapikv.resp"},
}
_LIBRARY = set(LAYERS)
LAYERS["okapikv.fuzz"] = set(_LIBRARY)  # the course fuzzer: processes, clients, checkers
LAYERS["okapikv.bench"] = set(_LIBRARY)  # benchmarks: clusters, clients, load processes
LAYERS["okapikv.cli"] = set(LAYERS) - {"okapikv.cli"}  # the ``okapi`` command: everything
LAYERS["okapikv.__main__"] = {"okapikv.cli"}


# ------------------------------------------------------------------------------------ the tree


GRAPH = import_graph(SRC)


def test_the_walk_sees_every_package_and_every_kind_of_import() -> None:
    assert {"okapikv.core.server", "okapikv.check.history", "okapikv.fuzz.command", "okapikv.cli",
            "okapikv"} <= set(GRAPH)
    assert "okapikv.client" in GRAPH["okapikv"]  # a function-level import (``okapikv.__getattr__``)
    assert "okapikv.resp.service" in GRAPH["okapikv.serve.app"]


def test_the_server_package_never_imports_the_resp_port() -> None:
    """The RESP port is a client of the server (it forwards through ``okapikv.client``), so the
    arrow runs resp -> server only; ``okapikv.serve`` is the one place that sees both."""
    assert "okapikv.resp" not in LAYERS["okapikv.server"]
    assert [(module, target) for module, targets in GRAPH.items() if within(module, "okapikv.server")
            for target in targets if within(target, "okapikv.resp")] == []
    assert any(within(target, "okapikv.server") for module, targets in GRAPH.items()
               if within(module, "okapikv.resp") for target in targets)


def test_every_module_is_in_the_layer_table() -> None:
    assert [module for module in GRAPH if entry_of(module, LAYERS) is None] == []


def test_every_import_follows_the_layer_table() -> None:
    assert layer_violations(GRAPH, LAYERS) == []


def test_the_layer_table_has_no_circle() -> None:
    assert circles(entry_graph(LAYERS)) == []


def test_no_import_circles_between_modules() -> None:
    assert [sorted(circle) for circle in circles(GRAPH)] == []


def test_check_and_core_are_pure_of_processes() -> None:
    """``okapi fuzz`` starts processes and clusters: it is a package of its own, not a checker."""
    assert not any(within(module, "okapikv.check") for module in GRAPH if "fuzz" in module)
    assert all(entry_of(target, LAYERS) in ("okapikv.check", CORE)
               for module, targets in GRAPH.items() if within(module, "okapikv.check") for target in targets)


#: the core's entry points a driver reaches only through the host (``okapikv.core.host``)
HOST_ONLY = {"on_timer", "handle_batch", "start_catch_up", "drain_changes", "cancel_reads"}


def _attribute_calls(module: str) -> set[str]:
    path = SRC.joinpath(*module.split(".")).with_suffix(".py")
    return {node.func.attr for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}


@pytest.mark.parametrize("driver", ["okapikv.server.node", "okapikv.sim.world"])
def test_the_server_and_the_simulator_drive_the_core_through_the_same_host(driver: str) -> None:
    """One driver contract (docs/design.md, "The host between the core and its drivers"): the
    asyncio node and the simulator's world both import the host, and neither calls the core's
    entry points itself, so the refusals, durability holding and the timer rule they run are the
    host's (``tests/sim/test_host_rules.py`` shows them in simulated runs)."""
    assert "okapikv.core.host" in GRAPH[driver]
    assert _attribute_calls(driver) & HOST_ONLY == set()


# ------------------------------------------------------------------------------------ the checker fails


def _tree(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize("bad", [
    "from okapikv.server.node import PartitionNode\n",
    "def later():\n    from okapikv.server import node\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import okapikv.server.node\n",
    "import importlib\nimportlib.import_module('okapikv.server.node')\n",
    "from ..server import node\n",
])
def test_a_bad_import_is_reported(tmp_path: Path, bad: str) -> None:
    src = _tree(tmp_path, {
        "okapikv/__init__.py": "",
        "okapikv/core/__init__.py": "",
        "okapikv/core/hlc.py": "X = 1\n",
        "okapikv/core/bad.py": "from okapikv.core.hlc import X\n" + bad,
        "okapikv/server/__init__.py": "",
        "okapikv/server/node.py": "from okapikv.core import hlc\nclass PartitionNode: ...\n",
    })
    layers = {"okapikv": set(), "okapikv.core": set(), "okapikv.server": {"okapikv.core"}}
    graph = import_graph(src)
    assert graph["okapikv.server.node"] == {"okapikv.core.hlc"}
    assert layer_violations(graph, layers) == [
        "okapikv.core.bad -> okapikv.server.node (okapikv.core may not import okapikv.server)"]
    assert layer_violations(graph, layers, {("okapikv.core.bad", "okapikv.server.node")}) == []


def test_a_circle_is_reported(tmp_path: Path) -> None:
    src = _tree(tmp_path, {
        "okapikv/__init__.py": "",
        "okapikv/server/__init__.py": "",
        "okapikv/server/metrics.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                     "    from okapikv.server.node import PartitionNode\n",
        "okapikv/server/node.py": "from okapikv.server.metrics import Histograms\n",
        "okapikv/server/app.py": "from okapikv.server import node, metrics\n",
    })
    graph = import_graph(src)
    assert circles(graph) == [frozenset({"okapikv.server.metrics", "okapikv.server.node"})]
    assert layer_violations(graph, {"okapikv": set(), "okapikv.server": set()}) == []


def test_a_circle_in_the_table_is_reported() -> None:
    layers = {"okapikv.a": {"okapikv.b.x"}, "okapikv.b": {"okapikv.c"}, "okapikv.c": {"okapikv.a"}}
    assert circles(entry_graph(layers)) == [frozenset({"okapikv.a", "okapikv.b", "okapikv.c"})]


def test_a_module_outside_the_table_is_reported() -> None:
    assert layer_violations({"okapikv.new.thing": set()}, LAYERS) == [
        "okapikv.new.thing: in no entry of the layer table"]
