"""Generates the Python gRPC code for the shared LLM service proto.

Used by setup.py (package builds), ci.sh and the container build. The proto lives
outside this package, in the repository's proto/ directory; the generated modules
are written to src/tarsy_llm/proto/ and are never committed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent
DEFAULT_PROTO_DIR = PACKAGE_ROOT.parent / "proto"
OUT_DIR = PACKAGE_ROOT / "src"
PROTO_NAME = "llm_service.proto"
# Mapping the proto into the package path makes protoc emit package-absolute
# imports (tarsy_llm.proto.llm_service_pb2) in the generated _grpc module.
VIRTUAL_DIR = "tarsy_llm/proto"


def generate(proto_dir: Path = DEFAULT_PROTO_DIR, out_dir: Path = OUT_DIR) -> list[Path]:
    """Runs protoc (from grpcio-tools) and returns the generated files."""
    from grpc_tools import protoc

    proto_file = proto_dir / PROTO_NAME
    if not proto_file.is_file():
        raise FileNotFoundError(f"proto not found: {proto_file}")
    include = Path(protoc.__file__).resolve().parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{VIRTUAL_DIR}={proto_dir}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"{VIRTUAL_DIR}/{PROTO_NAME}",
    ]
    code = protoc.main(args)
    if code != 0:
        raise RuntimeError(f"protoc failed with exit code {code}")
    target = out_dir / VIRTUAL_DIR
    return sorted(target.glob("llm_service_pb2*"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--proto-dir", type=Path, default=DEFAULT_PROTO_DIR)
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    ns = parser.parse_args()
    for path in generate(ns.proto_dir, ns.out_dir):
        print(f"generated {path.relative_to(ns.out_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
