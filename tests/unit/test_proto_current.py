"""The committed generated code in src/okapikv/wire must match proto/ (regenerate with
``cd proto && python ../scripts/gen_proto.py`` after editing a .proto file)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_matches_the_proto(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts" / "gen_proto.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate(tmp_path)
    generated = sorted((tmp_path / "okapikv" / "wire").glob("okapikv_pb2*"))
    assert [path.name for path in generated] == ["okapikv_pb2.py", "okapikv_pb2.pyi", "okapikv_pb2_grpc.py"]
    for path in generated:
        committed = ROOT / "src" / "okapikv" / "wire" / path.name
        assert committed.read_text() == path.read_text(), f"{committed} is stale: run scripts/gen_proto.py"
