"""The log configuration `pressloop serve` and `pressloop worker` share: JSON lines with the
run's ids and the current OpenTelemetry span's, text on a terminal, secrets never written."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from pressloop.config import Settings
from pressloop.observability.logs import HANDLER_NAME, configure_logging, run_logging

KEY = "sk-test-0123456789abcdef"
WP_PASSWORD = "abcd efgh ijkl mnop"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Put the root logger back as it was (pytest's handlers stay; ours goes)."""
    root = logging.getLogger()
    level = root.level
    yield
    for handler in list(root.handlers):
        if handler.get_name() == HANDLER_NAME:
            root.removeHandler(handler)
    root.setLevel(level)


def settings(tmp_path: Path, **values: Any) -> Settings:
    return Settings(data_dir=tmp_path, openai_api_key=KEY, wp_app_password=WP_PASSWORD, **values)


def records(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


@pytest.mark.usefixtures("restore_logging")
def test_json_lines_carry_the_run_and_the_span(tmp_path: Path) -> None:
    stream = io.StringIO()
    assert configure_logging(settings(tmp_path, log_format="json"), stream) == "json"
    log = logging.getLogger("pressloop.test")
    log.info("before the run")
    with run_logging("run_1", "thr_1"):
        log.info("during the run: %s", "a step")
        tracer = TracerProvider().get_tracer("pressloop.test")
        with tracer.start_as_current_span("turn") as span:
            log.warning("inside a span")
            context = span.get_span_context()
    log.info("after the run")
    lines = records(stream)
    assert [line["message"] for line in lines] == [
        "before the run",
        "during the run: a step",
        "inside a span",
        "after the run",
    ]
    assert [(line["run_id"], line["thread_id"]) for line in lines] == [
        ("", ""),
        ("run_1", "thr_1"),
        ("run_1", "thr_1"),
        ("", ""),
    ]
    assert lines[2]["trace_id"] == format(context.trace_id, "032x")
    assert lines[2]["span_id"] == format(context.span_id, "016x")
    assert lines[1]["trace_id"] == lines[1]["span_id"] == ""
    assert lines[2]["level"] == "warning" and lines[2]["logger"] == "pressloop.test"


@pytest.mark.usefixtures("restore_logging")
def test_secrets_never_reach_a_log_line(tmp_path: Path) -> None:
    stream = io.StringIO()
    configure_logging(settings(tmp_path, log_format="json"), stream)
    log = logging.getLogger("pressloop.test")
    token = "plt_" + "Zq9" * 10
    log.info("calling with key %s and password %s", KEY, WP_PASSWORD)
    log.info("Authorization: Bearer %s", token)
    try:
        raise RuntimeError(f"the provider refused {KEY}")
    except RuntimeError:
        log.exception("failed")
    written = stream.getvalue()
    for secret in (KEY, WP_PASSWORD, token, "Zq9Zq9Zq9"):
        assert secret not in written
    lines = records(stream)
    assert lines[0]["message"] == "calling with key [secret] and password [secret]"
    assert lines[1]["message"] == "Authorization: Bearer [secret]"
    assert "RuntimeError: the provider refused [secret]" in lines[2]["exception"]


@pytest.mark.usefixtures("restore_logging")
def test_text_on_a_terminal_unless_told(tmp_path: Path) -> None:
    terminal = Terminal()
    assert configure_logging(settings(tmp_path), terminal) == "text"
    with run_logging("run_2", "thr_2"):
        logging.getLogger("pressloop.test").info("plain %s", KEY)
    line = terminal.getvalue().strip()
    assert line.endswith("INFO pressloop.test plain [secret] [run=run_2]"), line
    assert configure_logging(settings(tmp_path), io.StringIO()) == "json"  # not a terminal
    assert configure_logging(settings(tmp_path, log_format="text"), io.StringIO()) == "text"
    assert len([h for h in logging.getLogger().handlers if h.get_name() == HANDLER_NAME]) == 1


@pytest.mark.usefixtures("restore_logging")
def test_a_line_per_http_request_is_not_logged_but_a_warning_is(tmp_path: Path) -> None:
    stream = io.StringIO()
    configure_logging(settings(tmp_path), stream)
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).info('HTTP Request: POST http://model/v1 "HTTP/1.1 200 OK"')
        logging.getLogger(name).warning("the connection was reset")
    logging.getLogger("pressloop.test").info("a run started")
    messages = [(r["logger"], r["message"]) for r in records(stream)]
    assert messages == [
        ("httpx", "the connection was reset"),
        ("httpx2", "the connection was reset"),
        ("pressloop.test", "a run started"),
    ]
