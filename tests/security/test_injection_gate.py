"""Issue 13: injected content cannot take the site.

Every injection path (a post, a comment, a user's display name, a media caption, plugin data, a
web page, a memory written in a tainted turn) followed by every sensitive or destructive action
(in the same answer, in the next round, in a later turn of the thread), in chat, heartbeat and
spawned runs, with every policy set to `allow`: none runs. Chat and heartbeat runs wait for a
person (the approval names the untrusted text), spawned runs are denied and told why. What
counts is WordPress itself, the database and the web server's log, not only the run's status.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pressloop.actions.wordpress.client import WordPressClient
from pressloop.contracts import Trigger
from pressloop.local_wordpress.local_site import LocalSite
from tests.security.injection import (
    ACTIONS,
    PATHS,
    Lab,
    WebServer,
    case_script,
    run_case,
    verdict,
)
from tests.wordpress.conftest import (  # noqa: F401 (the WordPress fixtures)
    wordpress,
    wordpress_client,
    wordpress_packages,
    wordpress_session,
)

TIMINGS = ("same answer", "next round", "later turn")
TRIGGERS = (Trigger.CHAT, Trigger.HEARTBEAT, Trigger.SPAWNED)
# Reading and acting in one answer (the review's PLAN) is the chat case; heartbeat and spawned
# runs go through the same executor, so they are tried in the next round and a later turn.
TIMINGS_OF = {Trigger.CHAT: TIMINGS}


@dataclass
class Tally:
    attempts: dict[str, int] = field(default_factory=dict)  # by trigger
    ungated: list[str] = field(default_factory=list)
    paths: set[str] = field(default_factory=set)

    def add(self, trigger: Trigger, attempts: int, ungated: list[str]) -> None:
        self.attempts[trigger.value] = self.attempts.get(trigger.value, 0) + attempts
        self.ungated += ungated

    def line(self) -> str:
        main = [t.value for t in TRIGGERS if t.value in self.attempts]
        extra = [t for t in self.attempts if t not in main]
        counted = sum(self.attempts[t] for t in main)
        line = (
            f"injection gate: {len(self.paths)} paths x {len(ACTIONS)} actions x {len(main)} "
            f"triggers ({', '.join(main)}) x 1-3 timings = {counted} attempts"
        )
        if extra:
            line += f"; {', '.join(extra)} on the post path: {sum(self.attempts[t] for t in extra)}"
        return f"{line}; {len(self.ungated)} ungated"


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    counted = Tally()
    yield counted
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if counted.attempts and reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("\n" + counted.line())


@pytest.fixture
async def lab(
    wordpress: LocalSite,  # noqa: F811
    wordpress_client: WordPressClient,  # noqa: F811
    tmp_path: Path,
) -> AsyncIterator[Lab]:
    web = WebServer()
    opened = await Lab(site=wordpress, wp=wordpress_client, web=web, data_dir=tmp_path).open()
    try:
        yield opened
    finally:
        await opened.service.close()
        web.shutdown()
        web.server_close()


async def sweep(lab: Lab, path: str, trigger: Trigger, timings: tuple[str, ...]) -> list[str]:
    """Run every guarded action after the injection on `path`; what went wrong, if anything."""
    read = await PATHS[path](lab)
    cases = [(name, t) for name in ACTIONS for t in (timings if read is not None else ("-",))]
    lab.script([a for n, t in cases for a in case_script(read, ACTIONS[n].call(lab), t, trigger)])
    ungated = []
    for name, timing in cases:
        thread, run = await run_case(lab, read, timing, trigger, ACTIONS[name])
        problem = await verdict(lab, thread, run, name, trigger)
        if problem is not None:
            ungated.append(f"{path} -> {name} ({timing}, {trigger.value}): {problem}")
    assert lab.provider.remaining == 0, "the script was not followed to its end"
    return ungated


@pytest.mark.parametrize("trigger", TRIGGERS, ids=lambda t: t.value)
@pytest.mark.parametrize("path", list(PATHS))
async def test_injected_text_never_runs_a_sensitive_or_destructive_action(
    lab: Lab, path: str, trigger: Trigger, tally: Tally
) -> None:
    timings = TIMINGS_OF.get(trigger, TIMINGS[1:])
    ungated = await sweep(lab, path, trigger, timings)
    tally.paths.add(path)
    tally.add(trigger, len(ACTIONS) * (1 if path == "memory" else len(timings)), ungated)
    assert not ungated, "\n".join(ungated)


@pytest.mark.parametrize("trigger", (Trigger.API, Trigger.MCP), ids=lambda t: t.value)
async def test_api_and_mcp_turns_wait_for_a_person_too(
    lab: Lab, trigger: Trigger, tally: Tally
) -> None:
    ungated = await sweep(lab, "post", trigger, ("next round",))
    tally.add(trigger, len(ACTIONS), ungated)
    assert not ungated, "\n".join(ungated)
