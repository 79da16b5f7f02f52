"""Every task of the benchmark, and the smoke set that tests/local/test_task_smoke.py runs."""

from __future__ import annotations

from bench.tasks.model import Task
from bench.tasks.tasks_content import CONTENT_TASKS
from bench.tasks.tasks_site import SITE_TASKS

TASKS: list[Task] = [*CONTENT_TASKS, *SITE_TASKS]
BY_NAME: dict[str, Task] = {task.name: task for task in TASKS}
assert len(BY_NAME) == len(TASKS), "task names must be unique"

# Five everyday requests across the areas: a new draft, a post found by title, a named person's
# comment, an approval that must wait, a question answered from the site.
SMOKE = [
    "draft_post",
    "publish_draft",
    "approve_named_comment",
    "make_admin_needs_approval",
    "site_identity",
]
