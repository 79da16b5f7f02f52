"""docs/operations.md's scrape configuration and alert rules, and docs/grafana-pressloop.json,
parse, and name only metrics Pressloop has (parsed from a real exposition of its registry)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import generate_latest

from pressloop.observability.metrics import Metrics
from tests.observability.conftest import names, parse

DOCS = Path(__file__).resolve().parents[2] / "docs"
METRIC = re.compile(r"\b(pressloop_[a-z0-9_]+)")


def yaml_blocks() -> list[Any]:
    text = (DOCS / "operations.md").read_text(encoding="utf-8")
    section = text.split("## Metrics and logs", 1)[1].split("\n## ", 1)[0]
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", section, re.S)]


def exposed() -> set[str]:
    """Every sample name a scrape of `pressloop serve` can show (each labelled metric once)."""
    metrics = Metrics()
    metrics.database_gauges()
    metrics.run_started("chat")
    metrics.run_rested("chat", "succeeded", 1.0)
    metrics.lease_lost()
    metrics.model_call("p", "m", 0.1, outcome="ok", input_tokens=1, output_tokens=1)
    metrics.action_call("a", "succeeded")
    metrics.budget_refused("action")
    return names(parse(generate_latest(metrics.registry).decode()))


def referenced(exprs: list[str]) -> set[str]:
    return {name for expr in exprs for name in METRIC.findall(expr)}


def test_the_alert_rules_name_existing_metrics() -> None:
    blocks = yaml_blocks()
    scrape = next(b for b in blocks if "scrape_configs" in b)
    assert {job["job_name"] for job in scrape["scrape_configs"]} == {
        "pressloop-serve",
        "pressloop-workers",
    }
    rules = next(b for b in blocks if "groups" in b)["groups"][0]["rules"]
    for rule in rules:
        assert {"alert", "expr", "labels", "annotations"} <= rule.keys(), rule
    exprs = [rule["expr"] for rule in rules]
    used = referenced(exprs)
    assert used and used <= exposed(), used - exposed()
    # What must page someone: dead runs, a stuck queue, old approvals, lease expiries.
    assert {
        "pressloop_runs_dead_total",
        "pressloop_queue_oldest_age_seconds",
        "pressloop_approvals_oldest_age_seconds",
        "pressloop_lease_expiries_total",
    } <= used


def test_the_dashboard_names_existing_metrics() -> None:
    dashboard = json.loads((DOCS / "grafana-pressloop.json").read_text(encoding="utf-8"))
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    used = referenced(exprs)
    assert used <= exposed(), used - exposed()
    assert len(used) >= 15


def test_the_table_documents_every_metric() -> None:
    text = (DOCS / "operations.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(pressloop_[a-z0-9_]+)`", text, re.M))
    samples = {n for n in exposed() if n.startswith("pressloop_") and not n.endswith("_created")}
    bare = {re.sub(r"_(bucket|sum|count)$", "", n) for n in samples}
    assert bare - documented == set() and documented <= bare, bare ^ documented
