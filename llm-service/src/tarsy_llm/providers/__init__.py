"""LLM provider backends and the registry that routes ``llm_config.backend`` to them."""
