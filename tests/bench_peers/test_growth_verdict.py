"""Workload 4's verdict: the growth ratio with the interval its own turns give it, so that a
ratio the machine's noise made is not taken for growth, nor growth for noise."""

from __future__ import annotations

import math
import random

from bench.peers import report


def _turns(centre_ms: float, spread_ms: float, n: int = 90, seed: int = 1) -> list[float]:
    draw = random.Random(seed)
    return [(centre_ms + draw.uniform(-spread_ms, spread_ms)) / 1000 for _ in range(n)]


def test_tight_turns_at_the_same_overhead_meet_the_goal() -> None:
    low, high = report.growth_interval(_turns(2.0, 0.1), _turns(2.0, 0.1, seed=2))
    assert 0.9 < low <= 1.0 <= high < 1.1
    assert report.growth_verdict((low, high)) == (True, False)


def test_a_clear_doubling_is_missed() -> None:
    low, high = report.growth_interval(_turns(2.0, 0.1), _turns(4.0, 0.1, seed=2))
    assert 1.8 < low <= high < 2.2
    assert report.growth_verdict((low, high)) == (False, False)


def test_noisy_sub_millisecond_overheads_straddle_the_line() -> None:
    # A 1.3x ratio between two sizes whose turns spread over twice their overhead.
    low, high = report.growth_interval(_turns(0.3, 0.6), _turns(0.39, 0.6, seed=2))
    assert low < report.GROWTH_LIMIT < high
    assert report.growth_verdict((low, high)) == (False, True)


def test_the_interval_is_the_same_for_the_same_turns() -> None:
    small, large = _turns(1.0, 0.5), _turns(1.1, 0.5, seed=2)
    assert report.growth_interval(small, large) == report.growth_interval(small, large)


def test_the_section_shows_the_interval_and_says_within_noise() -> None:
    def samples(overheads_ms: list[float]) -> dict[str, list[float]]:
        # turn = bare model turn + ROUNDS * overhead
        return {
            "turn_s": [4.0 + report.ROUNDS * o / 1000 for o in overheads_ms],
            "floor_s": [4.0] * len(overheads_ms),
        }

    small, large = _turns(0.3, 0.6), _turns(0.39, 0.6, seed=2)
    results = {
        "sqlite": {
            "pressloop": {
                "rows_per_copy": 27,
                "fill_s": {"100000": 14.8},
                "samples": {
                    "size10": samples([t * 1000 for t in small]),
                    "size100000": samples([t * 1000 for t in large]),
                },
            }
        }
    }
    verdicts: list[report.Verdict] = []
    section = report.growth_section(results, verdicts)
    assert "95% interval" in section
    [verdict] = verdicts
    assert verdict.noise and not verdict.met
    assert "**within noise**" in verdict.line()


def test_turns_as_fast_as_the_bare_model_leave_growth_unbounded_not_met() -> None:
    # Overheads around zero at the small size (a turn faster than its bare model turn, within
    # the clock's noise): a ratio to them has no scale and must never read as "no growth".
    small, large = _turns(0.0, 0.05), _turns(0.5, 0.05, seed=2)
    low, high = report.growth_interval(small, large)
    assert high == math.inf
    assert report.growth_verdict((low, high)) != (True, False)
    assert report.times(high) == "unbounded"
    assert report.growth_ratio(-0.0001, 0.0005) == math.inf
