"""A group commit's fence, events and notification (`store/batch_writes.py`), on both databases:
the runs still held are renewed and get their events, checkpoints and trace contexts; a run whose
lease moved on gets nothing written; on PostgreSQL it is one statement, sent without BEGIN and
COMMIT, whose notifications name exactly the held runs that have new events."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import sqlalchemy as sa

from pressloop.contracts import (
    ActionCall,
    Checkpoint,
    Event,
    EventType,
    Message,
    Role,
    RunStatus,
    TurnResult,
    TurnStatus,
    Usage,
)
from pressloop.store import claims as claim_store
from pressloop.store import events as event_store
from pressloop.store import run_finish
from pressloop.store import runs as run_store
from pressloop.store import threads as thread_store
from pressloop.store.batch_writes import fence_and_append, one_statement
from pressloop.store.db import Database
from pressloop.store.notify import CHANNEL, listen_url
from pressloop.store.records import Claim
from pressloop.store.run_writes import FinishWrite, RunWrite
from pressloop.store.schema import runs
from tests.support.queued_runs import queue_runs

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)
TTL_S = 30.0


async def _claimed(database: Database, count: int) -> list[Claim]:
    async with database.write() as conn:
        claims = []
        for run in await queue_runs(conn, count, now=NOW):
            claim = await claim_store.claim_run(
                conn, owner="me", ttl_s=TTL_S, now=NOW, run_id=run.id
            )
            assert claim is not None
            claims.append(claim)
    return claims


def _write(claim: Claim, texts: list[str], *, first_seq: int = 1, **extra: Any) -> RunWrite:
    events = [
        Event(
            run_id=claim.run.id,
            thread_id=claim.run.thread_id,
            seq=n,
            type=EventType.MESSAGE,
            ts=NOW + timedelta(milliseconds=n),
            data={"text": text, "nested": {"n": n, "ok": True}},
        )
        for n, text in enumerate(texts, start=first_seq)
    ]
    return RunWrite(
        run_id=claim.run.id,
        thread_id=claim.run.thread_id,
        token=claim.token,
        event_seq=first_seq - 1 + len(texts),
        events=events,
        **extra,
    )


async def _steal(database: Database, run_id: str) -> None:
    """Another worker took the run meanwhile: its token moved on."""
    async with database.write() as conn:
        await conn.execute(
            sa.update(runs).where(runs.c.id == run_id).values(lease_token=runs.c.lease_token + 1)
        )


async def test_held_runs_are_renewed_and_get_their_events_and_a_lost_one_nothing(
    database: Database,
) -> None:
    claims = await _claimed(database, 4)
    await _steal(database, claims[1].run.id)
    async with database.write() as conn:
        await run_store.request_cancel(conn, claims[2].run.id, now=NOW)
    later = NOW + timedelta(seconds=5)
    writes = [
        _write(claims[0], ["a", "é ✓"], checkpoint={"round": 2, "text": "x"}),
        _write(claims[1], ["lost"], checkpoint={"round": 9}),
        _write(claims[2], ["c"], trace_context={"traceparent": "00-abc-def-01"}),
        _write(claims[3], []),  # a renewal only
    ]
    async with database.write_one_statement() as conn:
        held = await fence_and_append(conn, writes, now=later, ttl_s=TTL_S)
    assert held == {claims[0].run.id: False, claims[2].run.id: True, claims[3].run.id: False}
    async with database.read() as conn:
        stored = {
            row.id: row
            for row in await conn.execute(
                sa.select(
                    runs.c.id,
                    runs.c.lease_expires_at,
                    runs.c.event_seq,
                    runs.c.checkpoint,
                    runs.c.trace_context,
                )
            )
        }
        events = {c.run.id: await event_store.list_events(conn, c.run.id) for c in claims}
    renewed = later + timedelta(seconds=TTL_S)
    for index in (0, 2, 3):
        assert stored[claims[index].run.id].lease_expires_at == renewed
    assert stored[claims[1].run.id].lease_expires_at == NOW + timedelta(seconds=TTL_S)
    assert stored[claims[0].run.id].checkpoint == {"round": 2, "text": "x"}
    assert stored[claims[1].run.id].checkpoint is None  # lost: not written
    assert stored[claims[2].run.id].trace_context == {"traceparent": "00-abc-def-01"}
    assert [stored[c.run.id].event_seq for c in claims] == [2, 0, 1, 0]
    assert events[claims[0].run.id] == writes[0].events  # same values, in order
    assert events[claims[1].run.id] == []
    assert events[claims[2].run.id] == writes[2].events
    assert events[claims[3].run.id] == []


async def test_a_write_without_a_checkpoint_keeps_the_stored_one(database: Database) -> None:
    [claim] = await _claimed(database, 1)
    async with database.write_one_statement() as conn:
        await fence_and_append(
            conn,
            [_write(claim, ["one"], checkpoint={"round": 1}, trace_context={"t": "1"})],
            now=NOW,
            ttl_s=TTL_S,
        )
    async with database.write_one_statement() as conn:
        held = await fence_and_append(
            conn, [_write(claim, ["two"], first_seq=2)], now=NOW, ttl_s=TTL_S
        )
    assert held == {claim.run.id: False}
    async with database.read() as conn:
        row = (
            await conn.execute(
                sa.select(runs.c.checkpoint, runs.c.trace_context, runs.c.status).where(
                    runs.c.id == claim.run.id
                )
            )
        ).one()
        seqs = [e.seq for e in await event_store.list_events(conn, claim.run.id)]
    assert (row.checkpoint, row.trace_context) == ({"round": 1}, {"t": "1"})
    assert row.status == RunStatus.RUNNING.value
    assert seqs == [1, 2]


TRANSACTION_ID = sa.text("SELECT pg_current_xact_id()::text")


async def test_on_postgresql_the_write_is_one_statement_without_a_transaction_around_it(
    postgres_database: str,
) -> None:
    database = Database.open(postgres_database, pool_size=1, max_overflow=0)
    try:
        async with database.write_one_statement() as conn:
            # No BEGIN: each statement is its own transaction.
            first = (await conn.execute(TRANSACTION_ID)).scalar_one()
            second = (await conn.execute(TRANSACTION_ID)).scalar_one()
        assert first != second
        async with database.write() as conn:  # the pooled connection is transactional again
            first = (await conn.execute(TRANSACTION_ID)).scalar_one()
            second = (await conn.execute(TRANSACTION_ID)).scalar_one()
        assert first == second
    finally:
        await database.close()


async def test_on_postgresql_the_held_runs_with_events_are_notified_once_each(
    postgres_database: str,
) -> None:
    database = Database.open(postgres_database)
    listener = await asyncpg.connect(listen_url(postgres_database))
    received: asyncio.Queue[str] = asyncio.Queue()
    await listener.add_listener(CHANNEL, lambda *args: received.put_nowait(args[-1]))
    try:
        claims = await _claimed(database, 3)
        await _steal(database, claims[1].run.id)
        writes = [
            _write(claims[0], ["a", "b", "c"]),  # three events, one notification
            _write(claims[1], ["lost"]),
            _write(claims[2], []),  # held, no events: nothing to wake a reader for
        ]
        async with database.write_one_statement() as conn:
            await fence_and_append(conn, writes, now=NOW, ttl_s=TTL_S)
        # A marker sent after the commit: every notification of the commit came before it.
        async with database.write() as conn:
            await conn.execute(sa.select(sa.func.pg_notify(CHANNEL, "marker")))
        payloads = []
        while (payload := await asyncio.wait_for(received.get(), 10)) != "marker":
            payloads.append(payload)
        assert payloads == [claims[0].run.id]
    finally:
        await listener.close()
        await database.close()


def _finish(status: RunStatus, at: datetime, transcript: list[Message], **columns: Any) -> Any:
    values = run_finish.finish_values(
        status=status,
        now=at,
        result=TurnResult(
            status=TurnStatus.SUCCEEDED,
            assistant_text=transcript[-1].content if transcript else "",
        ),
        usage=Usage(input_tokens=7, output_tokens=3),
        **columns,
    )
    return FinishWrite(values=values, at=at, transcript=transcript)


TRANSCRIPT = [
    Message(role=Role.USER, content="publish it"),
    Message(
        role=Role.ASSISTANT,
        tool_calls=[ActionCall(id="c1", name="wp_posts_list", params={"status": "draft"})],
    ),
    Message(
        role=Role.TOOL, content="[] ✓", tool_call_id="c1", name="wp_posts_list", untrusted=True
    ),
    Message(role=Role.ASSISTANT, content="Nothing to publish."),
]


async def test_held_runs_finish_with_their_transcripts_and_a_lost_one_does_not(
    database: Database,
) -> None:
    claims = await _claimed(database, 4)
    await _steal(database, claims[1].run.id)
    later = NOW + timedelta(seconds=5)
    at = NOW + timedelta(seconds=4)
    writes = [
        _write(claims[0], ["done"], checkpoint=Checkpoint(round=3).model_dump(mode="json")),
        _write(claims[1], ["lost"]),
        _write(claims[2], ["still going"]),  # held, not finishing: renewed only
        _write(claims[3], ["gave up"]),
    ]
    writes[0].finish = _finish(
        RunStatus.SUCCEEDED, at, TRANSCRIPT, checkpoint=Checkpoint(round=4), event_seq=1
    )
    writes[1].finish = _finish(RunStatus.SUCCEEDED, at, TRANSCRIPT[:1], event_seq=1)
    writes[3].finish = _finish(RunStatus.QUEUED, at, [], not_before=later, attempt=2, event_seq=1)
    async with database.write_one_statement() as conn:
        held = await fence_and_append(conn, writes, now=later, ttl_s=TTL_S, finish=True)
    assert set(held) == {claims[0].run.id, claims[2].run.id, claims[3].run.id}
    async with database.read() as conn:
        stored = {c.run.id: await run_store.get_run(conn, c.run.id) for c in claims}
        transcripts = {
            c.run.id: await thread_store.list_messages(conn, c.run.thread_id) for c in claims
        }
        threads = {c.run.id: await thread_store.get_thread(conn, c.run.thread_id) for c in claims}
        events = {c.run.id: await event_store.list_events(conn, c.run.id) for c in claims}
    done, lost, going, requeued = (stored[c.run.id] for c in claims)
    assert done is not None and lost is not None and going is not None and requeued is not None
    assert done.status is RunStatus.SUCCEEDED and done.finished_at == at
    assert (done.lease_owner, done.lease_expires_at) == (None, None)
    assert done.result is not None and done.result.assistant_text == "Nothing to publish."
    assert done.usage == Usage(input_tokens=7, output_tokens=3)
    assert done.checkpoint == Checkpoint(round=4)  # the finish's, over the write's
    assert [m.model_dump() for m in transcripts[claims[0].run.id]] == [
        m.model_dump() for m in TRANSCRIPT
    ]
    assert threads[claims[0].run.id] is not None
    assert threads[claims[0].run.id].updated_at == at  # type: ignore[union-attr]
    # Lost: still running under the other token, nothing of its finish written.
    assert lost.status is RunStatus.RUNNING and lost.finished_at is None and lost.result is None
    assert transcripts[claims[1].run.id] == [] and events[claims[1].run.id] == []
    assert threads[claims[1].run.id].updated_at == NOW  # type: ignore[union-attr]
    # Not finishing: renewed, its lease kept.
    assert going.status is RunStatus.RUNNING and going.lease_owner == "me"
    assert going.lease_expires_at == later + timedelta(seconds=TTL_S)
    assert transcripts[claims[2].run.id] == [] and events[claims[2].run.id] == writes[2].events
    # Back to the queue: its retry's time and attempt, no finished_at.
    assert requeued.status is RunStatus.QUEUED and requeued.lease_owner is None
    assert (requeued.not_before, requeued.attempt, requeued.finished_at) == (later, 2, None)
    assert events[claims[3].run.id] == writes[3].events


async def test_without_finish_the_finishes_are_left_to_the_caller(database: Database) -> None:
    claims = await _claimed(database, 2)
    writes = [_write(claim, ["done"]) for claim in claims]
    for write in writes:
        write.finish = _finish(RunStatus.SUCCEEDED, NOW, TRANSCRIPT[:1], event_seq=1)
    async with database.write(first=True) as conn:
        held = await fence_and_append(conn, writes, now=NOW, ttl_s=TTL_S)
        assert held == {claim.run.id: False for claim in claims}
    async with database.read() as conn:
        for claim in claims:
            run = await run_store.get_run(conn, claim.run.id)
            messages = await thread_store.list_messages(conn, claim.run.thread_id)
            assert run is not None and run.status is RunStatus.RUNNING and messages == []
            assert await event_store.list_events(conn, claim.run.id) != []


async def test_on_postgresql_a_finish_the_statement_does_not_know_is_written_after_it(
    postgres_database: str,
) -> None:
    database = Database.open(postgres_database)
    try:
        claims = await _claimed(database, 2)
        writes = [_write(claims[0], ["a"]), _write(claims[1], ["b"])]
        for write in writes:
            write.finish = _finish(RunStatus.SUCCEEDED, NOW, TRANSCRIPT[:2], event_seq=1)
        writes[1].finish.values["input"] = "rewritten"  # type: ignore[union-attr]
        # The committer then writes this batch in a transaction, not as one statement.
        assert one_statement(writes[:1]) and not one_statement(writes)
        async with database.write(first=True) as conn:
            held = await fence_and_append(conn, writes, now=NOW, ttl_s=TTL_S, finish=True)
        assert set(held) == {claims[0].run.id, claims[1].run.id}
        async with database.read() as conn:
            for claim in claims:
                run = await run_store.get_run(conn, claim.run.id)
                assert run is not None and run.status is RunStatus.SUCCEEDED
                messages = await thread_store.list_messages(conn, claim.run.thread_id)
                assert [m.model_dump() for m in messages] == [
                    m.model_dump() for m in TRANSCRIPT[:2]
                ]
            second = await run_store.get_run(conn, claims[1].run.id)
        assert second is not None and second.input == "rewritten"
    finally:
        await database.close()
