"""Small pieces both SDK adapters share when reading a provider's answer."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

import httpx2
from pydantic import BaseModel, ConfigDict, ValidationError

from pressloop.providers.base import ToolSpec
from pressloop.providers.errors_map import garbage

# Model calls one process may have in flight to one provider.
DEFAULT_MAX_CONNECTIONS = 1000


def http_client(sdk: ModuleType, max_connections: int) -> httpx2.AsyncClient:
    """The SDK's client on its aiohttp transport (the SDKs' `aiohttp` extra), every pooled
    connection kept alive between calls.

    The SDKs' default transport (httpcore) walks every pooled connection for each request, so
    its CPU per call grows with the calls in flight; on aiohttp it stays flat (docs/benchmarks.md
    has the figures). The SDKs' default pool also keeps only 100 connections alive, so beyond 100
    calls at once most calls opened a new connection (on a real provider, a TLS handshake too).
    """
    limits = httpx2.Limits(
        max_connections=max_connections, max_keepalive_connections=max_connections
    )
    client: httpx2.AsyncClient = sdk.DefaultAioHttpClient(limits=limits)
    return client


def dumps(value: Any) -> bytes:
    """JSON as the SDKs send it (compact, UTF-8, no NaN)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


# The tool catalogs a provider keeps serialized: one per distinct catalog in use (agents may be
# offered different actions), the least recently used one dropped beyond this.
MAX_SERIALIZED_CATALOGS = 16

_CatalogKey = tuple[tuple[str, str, int], ...]


class RequestBodies:
    """Request bodies as the JSON bytes an SDK sends (`post(content=...)`), the tool catalog
    serialized once per catalog instead of on every call.

    The catalog is most of a request (31 KB with the default actions and their 42 tools) and the
    same on every call of every turn: serializing it took 0.32 ms of a streamed call's 1.7 ms of
    CPU in the client (Intel Xeon 6/167), four times a turn, on the event loop the streams share.
    A catalog is known by its tools' names, descriptions and the identity of their parameter
    schemas: the registry builds each schema once and never changes it (a changed catalog brings
    new objects), and an entry here holds the schemas it was keyed on, so no id is reused while
    it is a key.
    """

    def __init__(self, render: Callable[[Sequence[ToolSpec]], list[dict[str, Any]]]) -> None:
        self._render = render
        self._catalogs: OrderedDict[_CatalogKey, tuple[bytes, list[dict[str, Any]]]] = OrderedDict()

    def encode(self, body: dict[str, Any], tools: Sequence[ToolSpec]) -> bytes:
        """`body` with `"tools"` (rendered by `render`) when there are any, as JSON bytes."""
        head = dumps(body)
        if not tools:
            return head
        if "tools" in body:
            raise ValueError("the tools come in `tools`, not in the body")
        separator = b"," if body else b""
        return b'%s%s"tools":%s}' % (head[:-1], separator, self._catalog(tools))

    def _catalog(self, tools: Sequence[ToolSpec]) -> bytes:
        key = tuple((t.name, t.description, id(t.parameters)) for t in tools)
        entry = self._catalogs.get(key)
        if entry is None:
            entry = (dumps(self._render(tools)), [t.parameters for t in tools])
            self._catalogs[key] = entry
            if len(self._catalogs) > MAX_SERIALIZED_CATALOGS:
                self._catalogs.popitem(last=False)
        else:
            self._catalogs.move_to_end(key)
        return entry[0]


class WireModel(BaseModel):
    """A tolerant view of a provider's JSON: unknown fields are ignored, not errors, because
    providers and compatible servers add fields all the time."""

    model_config = ConfigDict(extra="ignore")


W = TypeVar("W", bound=WireModel)


def parse(provider: str, model: type[W], value: object, what: str) -> W:
    """Validate one SDK response object (or the text it handed back) as `model`."""
    raw = plain(value)
    if isinstance(raw, str):  # without a JSON content type the SDK returns the text itself
        raise garbage(provider, f"a body that is not JSON: {raw!r:.200}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise garbage(provider, f"{what}: {raw!r:.200}") from exc


def decode_arguments(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """Tool-call arguments as a dict.

    Malformed JSON (or JSON that is not an object) is kept as `{"_raw_arguments": raw}` rather
    than raised, so the engine can tell the model its params were malformed and let it retry.
    """
    if isinstance(raw, dict):
        return raw
    if raw is None or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"_raw_arguments": raw}
    return value if isinstance(value, dict) else {"_raw_arguments": raw}


def plain(value: object) -> object:
    """An SDK response object back as the plain JSON it was built from.

    The SDKs build their objects without validation, so a field can be missing or hold anything;
    we validate the plain data with our own `WireModel`s instead of trusting attribute access.
    """
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_unset=True, warnings=False)
    return value


class SDKProvider:
    """What the SDK-backed adapters share: their identity and closing their HTTP client."""

    _name: str
    _model: str
    _base_url: str
    _client: Any

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> str:
        return self._model

    @property
    def supports_tools(self) -> bool:
        return True

    @property
    def base_url(self) -> str:
        return self._base_url

    async def aclose(self) -> None:
        await self._client.close()
