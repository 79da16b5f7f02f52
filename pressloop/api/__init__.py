"""The HTTP API: REST + SSE + bearer-token auth over the runtime's `Service`."""

from pressloop.api.app import create_app

__all__ = ["create_app"]
