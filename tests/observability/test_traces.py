"""Traces (issue 17): the spans of a run, its model calls, its actions and their WordPress
requests; a run resumed by another worker stays one trace; the OTLP/HTTP exporter of a real
`pressloop serve`; the run page shows the trace id; tracing is off unless OTEL_* configures it.

In this process the SDK's in-memory exporter records the spans (`tracing.use`); the worker and
`pressloop serve` subprocesses export with the real OTLP/HTTP exporter to `OtlpReceiver`, which
decodes opentelemetry-proto's `ExportTraceServiceRequest`. WordPress is the real local site of
tests/wordpress, behind `HoldingProxy`, which records the headers each request came with.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from pressloop.api import create_app
from pressloop.config import Settings
from pressloop.contracts import FINAL_RUN_STATUSES, RunStatus
from pressloop.errors import ConfigurationError
from pressloop.local_wordpress.local_site import LocalSite
from pressloop.observability import tracing
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store.run_writes import RunWrite, fence_many
from pressloop.store.schema import runs
from pressloop.ui import mount_ui
from tests.support.holding_proxy import HoldingProxy
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.support.processes import CrashPackWorkers, wait_for
from tests.support.serve import Serve, serve_env
from tests.wordpress.conftest import (  # noqa: F401 (the WordPress fixtures)
    proxy,
    wordpress,
    wordpress_packages,
    wordpress_session,
)

POST_TEXT = "A paragraph the traces must not carry."


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on in this process, every span kept in memory (off again afterwards)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider)
    try:
        yield exporter
    finally:
        tracing.use(None)
        provider.shutdown()


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def hexid(value: int) -> str:
    return format(value, "032x")


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def one(found: list[ReadableSpan], name: str) -> ReadableSpan:
    named = [s for s in found if s.name == name]
    assert len(named) == 1, (name, sorted({s.name for s in found}))
    return named[0]


async def stored_run(service: Service, run_id: str) -> Any:
    async with service.database.read() as conn:
        return (await conn.execute(sa.select(runs).where(runs.c.id == run_id))).one()


@pytest.fixture
async def site_api(
    spans: InMemorySpanExporter,
    proxy: HoldingProxy,  # noqa: F811
    wordpress: LocalSite,  # noqa: F811
    database_url: str,
    database: object,
    tmp_path: Path,
) -> AsyncIterator[tuple[Service, httpx.AsyncClient, dict[str, str]]]:
    """The HTTP app (API and UI) over a Service on the test database whose WordPress is the real
    site behind `proxy`; the scripted model creates a post, then answers."""
    env = wordpress.settings_env()
    settings = Settings(
        data_dir=tmp_path,
        database_url=database_url,
        provider="scripted",
        wp_url=proxy.url,
        wp_user=env["PRESSLOOP_WP_USER"],
        wp_app_password=env["PRESSLOOP_WP_APP_PASSWORD"],
    )
    scripted = ScriptedProvider(
        [
            call("create_post", title="Traced post", content=POST_TEXT),
            {"text": "The draft is there."},
        ]
    )
    service = await Service.open(settings, provider=lambda: scripted)
    _record, token = await service.create_token(name="admin", role="admin")
    app = mount_ui(create_app(service))
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://pressloop.test"
    )
    try:
        yield service, client, {"Authorization": f"Bearer {token}"}
    finally:
        await client.aclose()
        await service.close()


async def test_a_chat_turn_that_writes_to_wordpress_is_one_span_tree(
    site_api: tuple[Service, httpx.AsyncClient, dict[str, str]],
    spans: InMemorySpanExporter,
    proxy: HoldingProxy,  # noqa: F811
) -> None:
    service, client, auth = site_api
    thread = (await client.post("/v1/threads", json={}, headers=auth)).json()["id"]
    spans.clear()
    answer = await client.post(
        f"/v1/threads/{thread}/runs",
        json={"message": "Write a draft called Traced post", "mode": "wait"},
        headers=auth,
    )
    assert answer.status_code == 200, answer.text
    run_id = answer.json()["run"]["id"]
    assert answer.json()["run"]["status"] == "succeeded"

    async def run_span_ended() -> list[ReadableSpan]:
        # The answer may leave as the run is stored, a moment before its task ends its span.
        found = list(spans.get_finished_spans())
        return found if any(s.name.startswith("invoke_agent") for s in found) else []

    found = await wait_for(run_span_ended)

    request = one(found, "POST /v1/threads/{thread_id}/runs")
    run = one(found, "invoke_agent default")
    models = [s for s in found if s.name == "chat scripted"]
    tool = one(found, "execute_tool create_post")
    wordpress_calls = [s for s in found if s.kind is SpanKind.CLIENT and s.name == "POST"]
    assert request.kind is SpanKind.SERVER
    # One trace: request > run > (model call, action > WordPress request, model call).
    assert {s.context.trace_id for s in found} == {request.context.trace_id}
    assert parent_of(run) == request.context.span_id
    assert len(models) == 2 and all(parent_of(m) == run.context.span_id for m in models)
    assert parent_of(tool) == run.context.span_id
    first_call = min(models, key=lambda s: s.start_time or 0)
    assert [link.context.span_id for link in tool.links] == [first_call.context.span_id]
    assert len(wordpress_calls) == 1 and parent_of(wordpress_calls[0]) == tool.context.span_id
    assert (first_call.end_time or 0) <= (tool.start_time or 0)

    assert run.attributes is not None and tool.attributes is not None
    assert run.attributes["pressloop.run.id"] == run_id
    assert run.attributes["gen_ai.conversation.id"] == thread
    assert run.attributes["pressloop.run.trigger"] == "api"  # a run asked for over the API
    assert run.attributes["pressloop.run.attempt"] == 1
    assert run.attributes["pressloop.run.outcome"] == "succeeded"
    assert tool.attributes["gen_ai.tool.name"] == "create_post"
    assert tool.attributes["pressloop.action.risk"] == "write"
    assert tool.attributes["pressloop.action.decision"] == "allow"
    assert tool.attributes["pressloop.action.outcome"] == "succeeded"
    for model in models:
        assert model.kind is SpanKind.CLIENT and model.attributes is not None
        assert model.attributes["gen_ai.operation.name"] == "chat"
        assert model.attributes["gen_ai.provider.name"] == "scripted"
        assert model.attributes["gen_ai.request.model"] == "scripted"
        assert model.attributes["gen_ai.response.model"] == "scripted"
        assert model.attributes["gen_ai.response.finish_reasons"]

    # The tokens the spans report are the run's stored usage.
    row = await stored_run(service, run_id)
    usage = row.usage
    assert (
        sum(int(m.attributes["gen_ai.usage.input_tokens"]) for m in models)
        == usage["input_tokens"]
        > 0
    )
    assert (
        sum(int(m.attributes["gen_ai.usage.output_tokens"]) for m in models)
        == usage["output_tokens"]
        > 0
    )

    # The run keeps its trace; WordPress got `traceparent` naming the request's span.
    trace_id = hexid(run.context.trace_id)
    assert row.trace_context["traceparent"].startswith(
        f"00-{trace_id}-{format(run.context.span_id, '016x')}-"
    )
    posted = [headers for method, _path, headers in proxy.seen if method == "POST"]
    assert len(posted) == 1
    sent = {k.lower(): v for k, v in posted[0].items()}
    assert sent["traceparent"].startswith(
        f"00-{trace_id}-{format(wordpress_calls[0].context.span_id, '016x')}-"
    )

    # No prompt or answer text unless content capture is asked for.
    everything = json.dumps([dict(s.attributes or {}) for s in found], default=str)
    assert POST_TEXT not in everything and "Write a draft" not in everything
    assert "gen_ai.input.messages" not in everything

    # The run page shows the trace id (the HTML the page serves).
    signed = await client.post(
        "/ui/login",
        content=f"token={auth['Authorization'].split()[1]}&next=/ui/runs",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert signed.status_code == 303, signed.text
    page = await client.get(f"/ui/runs/{run_id}")
    assert page.status_code == 200, page.text[:300]
    assert 'data-field="trace_id" ' in page.text and f">{trace_id}</dd>" in page.text


async def test_message_content_is_in_the_spans_only_when_asked(
    database_url: str, database: object, tmp_path: Path
) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing.use(provider)
    settings = Settings(data_dir=tmp_path, database_url=database_url, provider="scripted")
    scripted = ScriptedProvider(
        [call("remember", content="The owner likes short titles."), {"text": "Noted it."}] * 2
    )
    service = await Service.open(settings, provider=lambda: scripted)
    try:
        for capture in (False, True):
            tracing.use(provider, capture=capture)
            thread = await service.create_thread()
            submitted = await service.submit(thread.id, f"Remember this ({capture})")
            done = await service.run_now(submitted.run.id)
            assert done is not None and done.status is RunStatus.SUCCEEDED
        found = [s for s in spans.get_finished_spans() if s.name == "chat scripted"]
        assert len(found) == 4
        plain, captured = found[:2], found[2:]
        assert all("gen_ai.input.messages" not in (s.attributes or {}) for s in plain)
        asked = (captured[0].attributes or {})["gen_ai.input.messages"]
        assert isinstance(asked, str) and "Remember this (True)" in asked
        answered = json.loads(str((captured[0].attributes or {})["gen_ai.output.messages"]))
        (part,) = answered[0]["parts"]
        assert part["type"] == "tool_call" and part["name"] == "remember"
        assert "Noted it." in str((captured[1].attributes or {})["gen_ai.output.messages"])
    finally:
        await service.close()
        tracing.use(None)
        provider.shutdown()


def otlp_env(receiver: OtlpReceiver, instance: str) -> dict[str, str]:
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",  # ms: spans leave soon after they end
        "OTEL_SERVICE_NAME": "pressloop-worker",
        "OTEL_RESOURCE_ATTRIBUTES": f"service.instance.id={instance}",
    }


@pytest.fixture
async def service_and_workers(
    database_url: str, tmp_path: Path, database: object
) -> AsyncIterator[tuple[Service, CrashPackWorkers]]:
    settings = Settings(data_dir=tmp_path, database_url=database_url, provider="scripted")
    service = await Service.open(settings, provider=lambda: ScriptedProvider([]))
    workers = CrashPackWorkers(database_url, tmp_path)
    try:
        yield service, workers
    finally:
        workers.stop_all()
        await service.close()


async def test_a_run_killed_in_one_worker_and_finished_by_another_is_one_trace(
    service_and_workers: tuple[Service, CrashPackWorkers],
) -> None:
    service, workers = service_and_workers
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "touch once")).run
    with OtlpReceiver().running() as receiver:
        workers.hang.touch()
        first = workers.start(
            [{"tool_calls": [{"name": "touch", "arguments": {"text": "a"}}]}],
            name="a",
            env=otlp_env(receiver, "a"),
        )

        async def asked_and_touched() -> list[ReceivedSpan]:
            exported = [s for s in receiver.received() if s.name == "chat scripted"]
            return exported if exported and workers.effect_lines() else []

        (asked,) = await wait_for(asked_and_touched)
        first.kill()  # mid-action: its run and action spans are never exported
        workers.hang.unlink()
        workers.start([{"text": "Touched it once."}], name="b", env=otlp_env(receiver, "b"))

        async def finished() -> Any:
            current = await service.get_run(run.id)
            return current if current.status in FINAL_RUN_STATUSES else None

        done = await wait_for(finished)
        assert done.status is RunStatus.SUCCEEDED and done.attempt == 2

        async def resumed() -> list[ReceivedSpan]:
            return [s for s in receiver.received() if s.name.startswith("invoke_agent")]

        (second,) = await wait_for(resumed)

    stored = await stored_run(service, run.id)
    _version, trace_id, first_span_id, _flags = stored.trace_context["traceparent"].split("-")
    ours = [s for s in receiver.received() if s.trace_id == trace_id]
    assert ours == receiver.received()  # every span exported is of the run's one trace
    # Worker a's model call was under the first attempt's span, the one the run keeps;
    # worker b's attempt continues under it.
    assert asked.resource["service.instance.id"] == "a" and asked.parent_span_id == first_span_id
    assert second.resource["service.instance.id"] == "b"
    assert second.resource["service.name"] == "pressloop-worker"
    assert second.parent_span_id == first_span_id
    assert second.attributes["pressloop.run.id"] == run.id
    assert second.attributes["pressloop.run.attempt"] == 2
    assert second.attributes["pressloop.run.outcome"] == "succeeded"
    assert first_span_id != second.span_id
    assert done.trace_id == trace_id


async def test_serve_exports_its_request_spans_over_otlp_http(tmp_path: Path) -> None:
    """A real `pressloop serve` with OTEL_* set: the OTLP/HTTP exporter delivers the span of a
    request, which continues the caller's `traceparent`."""
    with OtlpReceiver().running() as receiver:
        env = serve_env(
            tmp_path / "data",
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint.removesuffix("/v1/traces"),
            OTEL_SERVICE_NAME="pressloop-test",
            OTEL_BSP_SCHEDULE_DELAY="50",
        )
        caller_trace, caller_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
        async with Serve(tmp_path, env, "--no-local-wordpress") as server:
            async with httpx.AsyncClient(base_url=server.url, trust_env=False) as client:
                answer = await client.get(
                    "/v1/threads",
                    headers={
                        "Authorization": f"Bearer {server.admin_token}",
                        "traceparent": f"00-{caller_trace}-{caller_span}-01",
                    },
                )
                assert answer.status_code == 200, answer.text
                healthy = await client.get("/healthz")
                assert healthy.status_code == 200

            async def exported() -> list[ReceivedSpan]:
                return [s for s in receiver.received() if s.name == "GET /v1/threads"]

            (span,) = await wait_for(exported)
    assert span.trace_id == caller_trace and span.parent_span_id == caller_span
    assert span.kind == 2  # SPAN_KIND_SERVER
    assert span.resource["service.name"] == "pressloop-test"
    assert not [s for s in receiver.received() if "healthz" in s.name]  # not worth a trace


def test_tracing_is_off_unless_an_exporter_is_configured() -> None:
    assert tracing.exporters({}) == []
    assert tracing.exporters({"OTEL_SERVICE_NAME": "x"}) == []
    assert tracing.exporters({"OTEL_TRACES_EXPORTER": "none"}) == []
    assert tracing.exporters({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) == ["otlp"]
    assert tracing.exporters({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}) == [
        "otlp"
    ]
    assert tracing.exporters({"OTEL_TRACES_EXPORTER": "otlp,console"}) == ["otlp", "console"]
    disabled = {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}
    assert tracing.exporters(disabled) == []
    assert tracing.setup_tracing({}) is None and tracing.tracer() is None
    with pytest.raises(ConfigurationError, match="http/protobuf"):
        tracing.setup_tracing(
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
        )
    with pytest.raises(ConfigurationError, match="zipkin"):
        tracing.setup_tracing({"OTEL_TRACES_EXPORTER": "zipkin"})
    assert tracing.tracer() is None  # nothing was set up


async def test_off_nothing_is_traced_or_stored(
    database_url: str, database: object, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, database_url=database_url, provider="scripted")
    service = await Service.open(settings, provider=lambda: ScriptedProvider([{"text": "Hi."}]))
    try:
        assert service.runner.tracer is None
        thread = await service.create_thread()
        done = await service.run_now((await service.submit(thread.id, "hello")).run.id)
        assert done is not None and done.status is RunStatus.SUCCEEDED
        assert (await stored_run(service, done.id)).trace_context is None
        assert (await service.get_run(done.id)).trace_id is None
    finally:
        await service.close()


async def test_a_batch_of_several_runs_writes_each_its_trace_context(
    database_url: str, database: object, tmp_path: Path
) -> None:
    """The group commit stores a run's trace context with its first write, also when other
    runs (with or without one, with or without a checkpoint) share the batch."""
    settings = Settings(data_dir=tmp_path, database_url=database_url, provider="scripted")
    service = await Service.open(settings, provider=lambda: ScriptedProvider([]))
    try:
        for n in range(3):
            thread = await service.create_thread()
            await service.submit(thread.id, f"run {n}")
        claims = await service.runner.claimer.claim_many(3)
        assert len(claims) == 3
        traced = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
        writes = [
            RunWrite(
                run_id=c.run.id,
                thread_id=c.run.thread_id,
                token=c.token,
                event_seq=c.last_seq,
                trace_context=traced if n != 1 else None,
                checkpoint={"messages": []} if n == 2 else None,
            )
            for n, c in enumerate(claims)
        ]
        async with service.database.write() as conn:
            held = await fence_many(conn, writes, now=service.now(), ttl_s=30)
        assert set(held) == {c.run.id for c in claims}
        stored = [await service.get_run(c.run.id) for c in claims]
        assert [r.trace_context for r in stored] == [traced, None, traced]
        assert [r.trace_id for r in stored] == [
            "4bf92f3577b34da6a3ce929d0e0e4736",
            None,
            "4bf92f3577b34da6a3ce929d0e0e4736",
        ]
    finally:
        await service.close()
