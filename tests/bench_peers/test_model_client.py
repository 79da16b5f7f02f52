"""bench/model_client.py: every way of making a streamed call runs against the peers' model
server, for both answers, and the table shows each."""

from __future__ import annotations

from bench.model_client import ANSWERS, measure, render

WAYS = ("sdk typed create", "sdk post", "pressloop", "floor")


async def test_every_way_streams_both_answers_and_the_table_shows_them() -> None:
    found = await measure(calls=2, concurrency=2, rounds=2)

    assert set(found) == {(answer, way) for answer in ANSWERS for way in WAYS}
    assert all(len(values) == 2 and min(values) > 0 for values in found.values())
    table = render(found)
    for way in WAYS:
        assert f"| {way} |" in table
    assert "| floor | " in table and "1.00x" in table
