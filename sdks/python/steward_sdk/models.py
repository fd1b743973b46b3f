"""The pydantic v2 models of the API (generated from ``/openapi.json``), importable as
``steward_sdk.models``: ``from steward_sdk.models import AgentView``."""

from ._generated.models import *  # noqa: F401,F403
