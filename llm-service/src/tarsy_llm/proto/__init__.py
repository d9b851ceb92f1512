"""Generated gRPC code for llm.v1 (from the shared llm_service.proto).

The modules in this package are generated at build time (scripts/gen_proto.py)
and are not committed.
"""
