"""`lower_priority` (process_priority.py) in a process of its own: a nice value only goes up
without a privilege, so the test's own process must keep its."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# Lowers its priority with a thread already running and starts one after: each thread's nice
# value, read back with `getpriority` on its own id.
PROBE = """
import json, os, sys, threading
from pressloop.process_priority import lower_priority

def nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

seen = {}
before_started = threading.Event()
release = threading.Event()

def before() -> None:
    before_started.set()
    release.wait()
    seen["before"] = nice()

early = threading.Thread(target=before)
early.start()
before_started.wait()
seen["returned"] = lower_priority(int(sys.argv[1]))
seen["main"] = nice()
late = threading.Thread(target=lambda: seen.__setitem__("after", nice()))
late.start()
late.join()
release.set()
early.join()
print(json.dumps(seen))
"""


def lowered(by: int) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(by)], capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout))


@pytest.mark.parametrize("by", [3, 0, 40])
def test_every_thread_is_lowered_and_later_ones_inherit_it(by: int) -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    expected = min(19, base + by)  # 19: the lowest priority there is
    assert lowered(by) == {
        "returned": expected,
        "main": expected,
        "before": expected,
        "after": expected,
    }
