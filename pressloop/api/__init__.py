"""The HTTP API: REST + SSE + bearer-token auth over the runtime's `Service`.

`create_app` is imported when first asked for: a stream process imports a few modules of this
package (`frames.py`, `stream_channel.py`) and none of the app."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pressloop.api.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from pressloop.api.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
