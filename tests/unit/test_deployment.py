"""The paper's deployment (``okapikv.core.deployment``): defined once, read by every layer."""

from __future__ import annotations

import ast
from pathlib import Path

import okapikv
from okapikv import cli
from okapikv.cluster.config import local_cluster, realistic_wan_ms
from okapikv.core.deployment import PAPER_DC_NAMES, PAPER_WAN_MS, paper_delay_ms
from okapikv.sim.config import SimConfig, dc_names

SOURCE = Path(okapikv.__file__).parent


def test_the_matrix_is_square_symmetric_and_zero_on_the_diagonal() -> None:
    size = len(PAPER_DC_NAMES)
    assert len(PAPER_WAN_MS) == size and all(len(row) == size for row in PAPER_WAN_MS)
    for i in range(size):
        assert PAPER_WAN_MS[i][i] == 0.0
        for j in range(size):
            assert PAPER_WAN_MS[i][j] == PAPER_WAN_MS[j][i] > 0 or i == j


def test_delays_by_name() -> None:
    assert paper_delay_ms("oregon", "ireland") == PAPER_WAN_MS[0][2] == paper_delay_ms("ireland", "oregon")
    assert paper_delay_ms("virginia", "virginia") == 0.0
    assert paper_delay_ms("oregon", "tokyo") is None


def test_every_layer_reads_the_same_deployment() -> None:
    assert SimConfig().wan() == PAPER_WAN_MS and dc_names(3) == PAPER_DC_NAMES
    assert realistic_wan_ms(PAPER_DC_NAMES) == PAPER_WAN_MS
    assert local_cluster().dcs == PAPER_DC_NAMES
    assert ",".join(PAPER_DC_NAMES) == cli.DEFAULT_DCS


def test_no_other_module_lists_the_paper_dcs() -> None:
    """A tuple or list of the paper's DC names in code outside the deployment module is a second
    definition (docstrings and single names are fine): the benchmarks' and the fuzzer's defaults
    are the deployment's too."""
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        if path == SOURCE / "core" / "deployment.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Tuple | ast.List) and any(
                    isinstance(element, ast.Constant) and element.value in PAPER_DC_NAMES for element in node.elts):
                found.append(f"{path.relative_to(SOURCE)}:{node.lineno}")
    assert found == []
