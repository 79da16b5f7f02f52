"""The everyday-task benchmark (issue 18): requests a site owner makes, run through Pressloop on a
real local WordPress and judged by reading the site back. `python -m bench.tasks --help`.

- `catalog.py`: the tasks (`tasks_content.py`, `tasks_site.py`) and the smoke set.
- `model.py`: a task (setup, request, judge, the changes it allows), what the judge sees, a result.
- `seed.py`: what a task's site holds (posts, comments by named people, users, plugins, media).
- `state.py`: the site read back over REST, and what changed.
- `judge.py`: why a task failed; `runner.py`: one task through a real `Service`.
- `report.py`: the tables and the Markdown section.
"""
