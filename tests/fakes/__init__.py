"""Test doubles: local fake servers speaking the real LLM APIs."""
