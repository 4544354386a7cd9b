"""LLM access for compile tasks: task schemas, providers, and the caching task runner."""
