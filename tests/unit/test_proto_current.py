"""The committed generated code in src/okapikv/wire must match proto/ (regenerate with
``cd proto && python ../scripts/gen_proto.py`` after editing a .proto file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripts_support import load_script

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_matches_the_proto(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    load_script("gen_proto").generate(tmp_path)
    generated = sorted((tmp_path / "okapikv" / "wire").glob("okapikv_pb2*"))
    assert [path.name for path in generated] == ["okapikv_pb2.py", "okapikv_pb2.pyi", "okapikv_pb2_grpc.py"]
    for path in generated:
        committed = ROOT / "src" / "okapikv" / "wire" / path.name
        assert committed.read_text() == path.read_text(), f"{committed} is stale: run scripts/gen_proto.py"
