"""Regenerate the committed protobuf / gRPC code from proto/ (run after editing a .proto file).

``tests/unit/test_proto_current.py`` regenerates into a temporary folder and fails if the committed
files differ, so the generated code can never silently drift from its source.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PROTO_FILES = ["okapikv/wire/okapikv.proto"]


def generate(out_dir: Path) -> None:
    from grpc_tools import protoc  # type: ignore[import-untyped]

    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *PROTO_FILES,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "src")
