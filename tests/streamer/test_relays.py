"""A run streamed through the stream process: its calls take the route while the stream is
there, and its text deltas may wait for a later commit, as those a stream of the serving process
sends do (hurried, they were most of the group commits and held the other runs' events)."""

from __future__ import annotations

from pressloop.runtime.bus import EventBus
from pressloop.runtime.stream_relays import StreamRelays


def test_a_watched_run_is_routed_and_its_deltas_may_wait_until_it_is_let_go() -> None:
    bus = EventBus()
    relays = StreamRelays("http://127.0.0.1:1/relay/secret/", bus)
    assert relays.route("run_a", 3, 0) is None and not bus.streamed("run_a")
    alive = True
    relays.watch("run_a", "key1", lambda: alive)
    route = relays.route("run_a", 3, 2)
    assert route is not None
    assert route.base_url == "http://127.0.0.1:1/relay/secret/key1/3/2"
    assert route.alive() and bus.streamed("run_a") and not bus.streamed("run_b")
    alive = False
    assert not route.alive()  # the stream process let go: the call goes straight on
    relays.unwatch("run_a", "another key")  # a stale stream's release changes nothing
    assert bus.streamed("run_a")
    relays.unwatch("run_a", "key1")
    assert relays.route("run_a", 3, 0) is None and not bus.streamed("run_a")


def test_a_stream_here_still_lets_the_deltas_wait() -> None:
    bus = EventBus()
    subscription = bus.subscribe("run_a", parts=True)
    assert bus.streamed("run_a") and bus.wants_parts("run_a")
    bus.unsubscribe("run_a", subscription)
    assert not bus.streamed("run_a")
