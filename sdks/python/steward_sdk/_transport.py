"""The HTTP base of the generated clients (httpx, sync and async)."""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

import httpx
from pydantic import TypeAdapter

from .errors import StewardAPIError, StewardConnectionError

_USER_AGENT = "steward-sdk-python/0.1.0"


def _headers(api_key: str | None, token: str | None, admin_key: str | None) -> dict[str, str]:
    h = {"user-agent": _USER_AGENT, "accept": "application/json"}
    if api_key:
        h["x-api-key"] = api_key
    if token:
        h["authorization"] = f"Bearer {token}"
    if admin_key:
        h["x-admin-key"] = admin_key
    return h


def _clean_query(query: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not query:
        return None
    out: dict[str, Any] = {}
    for k, v in query.items():
        if v is None:
            continue
        out[k] = ("true" if v else "false") if isinstance(v, bool) else v
    return out or None


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: they are sent as null (numpy and pandas results hold them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _encode_body(body: Any) -> bytes | None:
    if body is None:
        return None
    if hasattr(body, "model_dump"):
        body = body.model_dump(mode="json", exclude_unset=True)
    try:
        text = json.dumps(body, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(body), separators=(",", ":"), default=str, allow_nan=False)
    return text.encode()


def _is_json(ctype: str) -> bool:
    """``application/json`` or a ``+json`` type; JSON lines (``x-ndjson``) are text."""
    media = ctype.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _decode(resp: httpx.Response, adapter: TypeAdapter[Any] | None, method: str, path: str) -> Any:
    if resp.status_code >= 400:
        try:
            problem = resp.json()
        except ValueError:
            problem = {"detail": resp.text}
        raise StewardAPIError(resp.status_code, problem if isinstance(problem, dict) else None, method, path)
    if resp.status_code == 204 or not resp.content:
        return None
    ctype = resp.headers.get("content-type", "")
    if not _is_json(ctype):
        return resp.text
    if adapter is None:
        return resp.json()
    return adapter.validate_json(resp.content)


class BaseClient:
    """Synchronous transport: one keep-alive httpx.Client."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        token: str | None = None,
        admin_key: str | None = None,
        timeout: float = 10.0,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = http_client or httpx.Client(
            base_url=self.base_url, timeout=timeout, headers=_headers(api_key, token, admin_key)
        )

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        adapter: TypeAdapter[Any] | None = None,
    ) -> Any:
        content = _encode_body(body)
        headers = {"content-type": "application/json"} if content is not None else None
        try:
            resp = self._http.request(method, path, params=_clean_query(query), content=content, headers=headers)
        except httpx.TransportError as e:
            raise StewardConnectionError(method, path, e) from e
        return _decode(resp, adapter, method, path)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "BaseClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BaseAsyncClient:
    """Asynchronous transport: one keep-alive httpx.AsyncClient."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        token: str | None = None,
        admin_key: str | None = None,
        timeout: float = 10.0,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = http_client or httpx.AsyncClient(
            base_url=self.base_url, timeout=timeout, headers=_headers(api_key, token, admin_key)
        )

    async def _request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        adapter: TypeAdapter[Any] | None = None,
    ) -> Any:
        content = _encode_body(body)
        headers = {"content-type": "application/json"} if content is not None else None
        try:
            resp = await self._http.request(
                method, path, params=_clean_query(query), content=content, headers=headers
            )
        except httpx.TransportError as e:
            raise StewardConnectionError(method, path, e) from e
        return _decode(resp, adapter, method, path)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "BaseAsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
