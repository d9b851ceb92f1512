"""Build hook: generate the gRPC code from the shared proto while building.

All metadata lives in pyproject.toml; this file only adds code generation to
build_py so that `pip install .` and container builds ship the generated modules.
"""

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithProto(build_py):
    """Runs scripts/gen_proto.py before the regular build_py step."""

    def run(self):
        script = HERE / "scripts" / "gen_proto.py"
        spec = importlib.util.spec_from_file_location("gen_proto", script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        generated_dir = HERE / "src" / "tarsy_llm" / "proto"
        if (module.DEFAULT_PROTO_DIR / module.PROTO_NAME).is_file():
            module.generate()
        elif not (generated_dir / "llm_service_pb2.py").is_file():
            raise RuntimeError("the proto directory is missing and no generated code exists")
        super().run()


setup(cmdclass={"build_py": BuildPyWithProto})
