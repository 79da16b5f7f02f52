"""What the observability tests share: scraping `/metrics` and reading one sample of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.support.serve import Serve, serve_env

Samples = list[Sample]


def parse(text: str) -> Samples:
    """Every sample of a scrape, through prometheus_client's own parser."""
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


async def scrape(url: str, token: str | None = None) -> Samples:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(trust_env=False, timeout=10) as client:
        answer = await client.get(url, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain"), answer.headers
    return parse(answer.text)


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample `name` whose labels include `labels` (0 when there is none: a labelled
    counter shows once it has counted)."""
    found = [s.value for s in samples if s.name == name and labels.items() <= s.labels.items()]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else 0.0


def names(samples: Samples) -> set[str]:
    return {sample.name for sample in samples}


def script_file(path: Path, answers: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(answers), encoding="utf-8")
    return path


def metrics_serve(tmp_path: Path, database_url: str, script: Path, **settings: str) -> Serve:
    """A real `pressloop serve` on the test's database, answering from `script`."""
    env = serve_env(tmp_path / "data", script, PRESSLOOP_DATABASE_URL=database_url, **settings)
    return Serve(tmp_path, env, "--no-local-wordpress")
