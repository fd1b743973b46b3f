"""Thin adapters of the governance layer for agent frameworks.

- :mod:`steward_sdk.integrations.langchain`: tool wrapper and callback handler (langchain-core)
- :mod:`steward_sdk.integrations.langgraph`: node guard (langgraph)
- :mod:`steward_sdk.integrations.openai_agents`: tool guardrails (openai-agents)

Each reports an unregistered agent to discovery with its integration as the source and reads
its state from ``GET /integrations/{integration}/status`` (``status()``).
"""
