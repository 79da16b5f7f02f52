"""Traces (OpenTelemetry): set up once per process by `pressloop serve`, `pressloop worker` and
`pressloop mcp` (`setup_tracing`), from the standard OTEL_* variables only.

Off by default: with no exporter named (OTEL_TRACES_EXPORTER unset or `none`, and no
OTEL_EXPORTER_OTLP_ENDPOINT / _TRACES_ENDPOINT), or with OTEL_SDK_DISABLED=true, no SDK tracer
provider is made and `tracer()` is None: the runtime then adds no span and wraps nothing, and
the WordPress client and the API are not instrumented. On, the SDK reads the rest of the
OTEL_* variables itself: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the service is
`pressloop` unless they name one), OTEL_TRACES_SAMPLER, OTEL_BSP_*, OTEL_EXPORTER_OTLP_* (the
OTLP exporter is OTLP/HTTP with protobuf).

What the spans are and their attributes: docs/operations.md, "Traces". Prompt and completion
text stay out of the spans unless OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.

A run keeps its trace: the W3C `traceparent` of its first attempt's span is stored with the run
(`runs.trace_context`), and each later attempt, in whichever process, starts its span as a child
of it (`carrier_of`, `context_of`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from pressloop.errors import ConfigurationError

if TYPE_CHECKING:
    from starlette.types import ASGIApp

SERVICE_NAME = "pressloop"
INSTRUMENTATION = "pressloop"
CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# Requests not worth a trace each (a scrape every 15 s, health checks, the UI's static files),
# unless OTEL_PYTHON_FASTAPI_EXCLUDED_URLS says otherwise.
EXCLUDED_URLS = "/healthz$,/metrics$,/ui/static/"

# The stored form of a run's trace is W3C Trace Context, whatever OTEL_PROPAGATORS says.
_W3C = TraceContextTextMapPropagator()


class _State:
    provider: trace.TracerProvider | None = None
    tracer: trace.Tracer | None = None
    capture_content: bool = False


_state = _State()


def exporters(environ: Mapping[str, str]) -> list[str]:
    """The span exporters the OTEL_* variables ask for ([] : tracing stays off)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    named = [
        name.strip().lower()
        for name in environ.get("OTEL_TRACES_EXPORTER", "").split(",")
        if name.strip()
    ]
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if not named and endpoint:
        named = ["otlp"]
    return [name for name in named if name != "none"]


def capture_content(environ: Mapping[str, str]) -> bool:
    return environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"


def _exporter(name: str, environ: Mapping[str, str]) -> Any:
    if name == "otlp":
        protocol = (
            environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf"
        )
        if protocol.strip() != "http/protobuf":
            raise ConfigurationError(
                f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: Pressloop exports OTLP over HTTP with "
                "protobuf only (http/protobuf; the collector's port 4318)"
            )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if name == "console":  # stderr: `pressloop mcp` speaks MCP on stdout
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)
    raise ConfigurationError(f"OTEL_TRACES_EXPORTER={name}: Pressloop knows otlp, console and none")


def setup_tracing(environ: Mapping[str, str] | None = None) -> trace.TracerProvider | None:
    """Make the process's SDK tracer provider from the OTEL_* variables, set it as the global
    one and use it (None, and nothing set up, when tracing is off)."""
    environ = os.environ if environ is None else environ
    names = exporters(environ)
    if not names:
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    chosen = [_exporter(name, environ) for name in names]  # refuse before setting anything up
    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    provider = TracerProvider(resource=resource)  # OTEL_TRACES_SAMPLER
    for exporter in chosen:
        provider.add_span_processor(BatchSpanProcessor(exporter))  # OTEL_BSP_*
    trace.set_tracer_provider(provider)
    use(provider, capture=capture_content(environ))
    return provider


def use(provider: trace.TracerProvider | None, *, capture: bool = False) -> None:
    """Trace with `provider` from now on (None: off). What is built afterwards (a runner, the
    WordPress client, the API) traces with it; `setup_tracing` calls it, tests too."""
    _state.provider = provider
    _state.tracer = provider.get_tracer(INSTRUMENTATION) if provider is not None else None
    _state.capture_content = capture


def shutdown_tracing() -> None:
    """Export what is left and stop (the process is ending)."""
    provider = _state.provider
    use(None)
    shutdown = getattr(provider, "shutdown", None)
    if shutdown is not None:
        shutdown()


def tracer() -> trace.Tracer | None:
    """Pressloop's tracer, or None when tracing is off."""
    return _state.tracer


def capturing_content() -> bool:
    """Whether model spans carry the prompt and the answer (off unless asked)."""
    return _state.capture_content


def instrument_httpx(client: Any) -> None:
    """Spans for an httpx client's requests, each sending `traceparent` (when tracing is on)."""
    if _state.provider is None:
        return
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    HTTPXClientInstrumentor.instrument_client(client, tracer_provider=_state.provider)


def traced_asgi(app: ASGIApp) -> ASGIApp:
    """The API's ASGI app with a server span for each request it answers (when tracing is on);
    an incoming `traceparent` makes it a child of the caller's span. It is the FastAPI
    instrumentation's middleware and span names (`POST /v1/threads/{thread_id}/runs`), put
    outside Pressloop's own edges (`api/app.py`): `FastAPIInstrumentor.instrument_app` expects
    Starlette's own stack outermost, which Pressloop's app is not."""
    if _state.provider is None:
        return app
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
    from opentelemetry.instrumentation.fastapi import _get_default_span_details

    traced: ASGIApp = OpenTelemetryMiddleware(
        app,
        excluded_urls=os.environ.get("OTEL_PYTHON_FASTAPI_EXCLUDED_URLS", EXCLUDED_URLS),
        default_span_details=_get_default_span_details,
        tracer_provider=_state.provider,
        exclude_spans=["receive", "send"],  # one span per request, not one per ASGI message
    )
    return traced


def carrier_of(span: trace.Span) -> dict[str, str]:
    """The span's W3C trace context (`traceparent`, and `tracestate` if any), to store."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


def context_of(carrier: Mapping[str, str]) -> Context:
    """A context whose parent span is the one `carrier` names (`carrier_of`)."""
    return _W3C.extract(dict(carrier))


def note_approval(approval_id: str, status: str, waited_s: float | None) -> None:
    """The action span running now waited for a person: which approval, their decision and
    how long they took (nothing when no span records)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    span.set_attribute("pressloop.approval.id", approval_id)
    span.set_attribute("pressloop.approval.status", status)
    if waited_s is not None:
        span.set_attribute("pressloop.approval.wait_s", round(max(0.0, waited_s), 3))
