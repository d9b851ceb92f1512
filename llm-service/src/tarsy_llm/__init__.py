"""TARSy LLM service: a thin, stateless gRPC proxy to LLM providers.

The orchestrator sends the full conversation with every ``Generate`` call; this
service turns it into one provider call and streams the answer back. It keeps no
conversation state, only SDK clients and Gemini thought signatures.
"""

__version__ = "0.1.0"
