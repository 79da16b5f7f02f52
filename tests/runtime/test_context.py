"""The contexts a claim batch reads for its runs (agent, history, memories, kill switch, budgets),
in one set of queries for all of them, over both databases."""

from __future__ import annotations

from pressloop.contracts import Message, Role, Usage
from pressloop.runtime.context import load_contexts
from pressloop.runtime.service import Service
from pressloop.store import agents as agent_store
from pressloop.store import memories as memory_store
from pressloop.store import settings_repo
from pressloop.store import threads as thread_store
from pressloop.store import usage as usage_store
from tests.conftest import FakeClock
from tests.runtime.conftest import ServiceFactory


async def test_a_batch_reads_each_runs_own_context(
    make_service: ServiceFactory, clock: FakeClock
) -> None:
    service: Service = await make_service([], budget_user_actions=3)
    now = clock()
    day = now.date().isoformat()
    async with service.database.write() as conn:
        await agent_store.ensure_agent(conn, now=now, agent_id="poet", instructions="Rhyme.")
        for agent_id, content in (
            ("default", "The owner likes teal."),
            ("default", "Posts go out on Mondays."),
            ("poet", "Sonnets only."),
        ):
            await memory_store.add_memory(
                conn, agent_id=agent_id, content=content, tags=[], now=now
            )
    threads = [
        await service.create_thread(title="a"),
        await service.create_thread(title="b", agent_id="poet"),
        await service.create_thread(title="c"),
    ]
    async with service.database.write() as conn:
        for index, thread in enumerate(threads):
            earlier = [
                Message(role=Role.USER, content=f"{thread.title} {n}") for n in range(index + 2)
            ]
            await thread_store.append_messages(conn, thread.id, earlier, now=now)
    inputs = [
        ("Which colour, teal?", "ann"),
        ("Write sonnets", "bo"),
        ("When do posts go out?", "bo"),
    ]
    runs = [
        (await service.submit(thread.id, text, user=user)).run
        for thread, (text, user) in zip(threads, inputs, strict=True)
    ]
    # ann's runs were accepted, then her budget was spent (a new turn is refused at once).
    async with service.database.write() as conn:
        await usage_store.add_usage(
            conn, day=day, subjects={"user": "ann"}, usage=Usage(action_calls=3)
        )

    async with service.database.read() as conn:
        contexts = await load_contexts(
            conn, runs, settings=service.settings, day=day, history_limit=2
        )

    first, second, third = (contexts[run.id] for run in runs)
    # The newest 2 messages of each run's own thread, oldest first.
    assert [m.content for m in first.history] == ["a 0", "a 1"]
    assert [m.content for m in second.history] == ["b 1", "b 2"]
    assert [m.content for m in third.history] == ["c 2", "c 3"]
    assert first.agent is not None and first.agent.id == "default"
    assert second.agent is not None and second.agent.instructions == "Rhyme."
    # Memories of the run's agent, the most relevant to its message first.
    assert first.memories[0].content == "The owner likes teal."
    assert [m.content for m in second.memories] == ["Sonnets only."]
    assert third.memories[0].content == "Posts go out on Mondays."
    assert not any(m.untrusted for c in contexts.values() for m in c.memories)
    # ann used her 3 actions today; bo has room.
    assert first.refusal is not None and "user ann" in first.refusal.message
    assert second.refusal is None and third.refusal is None
    assert not any(c.disabled for c in contexts.values())

    async with service.database.write() as conn:
        await settings_repo.set_setting(conn, "agent_disabled", True, now=now)
        disabled = await load_contexts(
            conn, runs, settings=service.settings, day=day, history_limit=2
        )
    assert all(c.disabled for c in disabled.values())
