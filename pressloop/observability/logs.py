"""Logs: one configuration for `pressloop serve` and `pressloop worker` (`configure_logging`).

PRESSLOOP_LOG_FORMAT: `json` writes one JSON object a line (`ts`, `level`, `logger`, `message`,
`run_id`, `thread_id`, `trace_id`, `span_id`, and `exception` with a traceback); `text` the
familiar `time LEVEL logger message`; `auto` (the default) is text on a terminal and JSON
anywhere else (systemd, a container, a file). `run_id` and `thread_id` come from a context
variable the runner sets while a run's turn runs (`run_logging`), so every line logged for a run
carries them, whichever module logs it; `trace_id` and `span_id` come from the current
OpenTelemetry span (empty when there is none).

Secrets never reach a log line: the configured keys and passwords (`settings_secrets`) and
anything shaped like an API token or a bearer credential are replaced by `[secret]` in the
message and the traceback of every record, whatever logger wrote it; secret params are already
kept out of everything the runtime logs (`pressloop/redaction.py`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
from collections.abc import Iterable, Iterator
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import IO, Any, Literal

from opentelemetry import trace

from pressloop.config import Settings
from pressloop.redaction import SECRET, scrub

LogFormat = Literal["auto", "text", "json"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

# The run whose turn is running in this task (and the tasks it starts): "" outside a run.
_run_id: ContextVar[str] = ContextVar("pressloop_run_id", default="")
_thread_id: ContextVar[str] = ContextVar("pressloop_thread_id", default="")

# Pressloop's API tokens, and a credential after "Bearer " (whoever logs a header).
TOKEN_PATTERN = re.compile(r"\bplt_[A-Za-z0-9_\-]{8,}|(?<=Bearer )[A-Za-z0-9._~+/\-]{8,}=*")


@contextlib.contextmanager
def run_logging(run_id: str, thread_id: str) -> Iterator[None]:
    """Every record logged inside carries this run's and thread's ids."""
    run_token = _run_id.set(run_id)
    thread_token = _thread_id.set(thread_id)
    try:
        yield
    finally:
        _thread_id.reset(thread_token)
        _run_id.reset(run_token)


def current_run() -> tuple[str, str]:
    """The run and thread ids of the turn running here ("" outside a run)."""
    return _run_id.get(), _thread_id.get()


def current_trace() -> tuple[str, str]:
    """The current OpenTelemetry span's trace and span ids in hex ("" when there is none)."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return "", ""
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


class ContextFilter(logging.Filter):
    """Adds `run_id`, `thread_id`, `trace_id` and `span_id` to every record, and replaces
    secrets in its message and traceback."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        # Longest first, so a secret containing another is replaced whole.
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def scrubbed(self, text: str) -> str:
        return TOKEN_PATTERN.sub(SECRET, scrub(text, self.secrets))

    def filter(self, record: logging.LogRecord) -> bool:
        record.run_id, record.thread_id = current_run()
        record.trace_id, record.span_id = current_trace()
        message = record.getMessage()
        cleaned = self.scrubbed(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.scrubbed(record.exc_text)
        if record.stack_info:
            record.stack_info = self.scrubbed(record.stack_info)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "run_id": getattr(record, "run_id", ""),
            "thread_id": getattr(record, "thread_id", ""),
            "trace_id": getattr(record, "trace_id", ""),
            "span_id": getattr(record, "span_id", ""),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = record.stack_info
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """The familiar text line, with `run=` when a run is running."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        run_id = getattr(record, "run_id", "")
        if run_id:
            first, newline, rest = text.partition("\n")
            text = f"{first} [run={run_id}]{newline}{rest}"
        return text


def settings_secrets(settings: Settings) -> list[str]:
    """The secret values the settings hold (providers' keys, the site's application password)."""
    values = [
        settings.openai_api_key,
        settings.anthropic_api_key,
        settings.openrouter_api_key,
        settings.zai_api_key,
        settings.wp_app_password,
    ]
    return [v for v in values if v]


def resolved_format(setting: LogFormat, stream: IO[str]) -> Literal["text", "json"]:
    if setting != "auto":
        return setting
    isatty = getattr(stream, "isatty", None)
    return "text" if isatty is not None and isatty() else "json"


HANDLER_NAME = "pressloop"
# Libraries whose INFO lines say nothing an operator needs (each migration step at start).
# Loggers that say too much at INFO: httpx (and the openai SDK's copy, httpx2) logs a line for
# every request, each model call and WordPress request (808 lines in a 200-stream benchmark run,
# 0.6% of its CPU); a failed request is reported by Pressloop with its cause.
QUIET_LOGGERS = ("alembic", "httpx", "httpx2", "httpcore")

# uvicorn's loggers, which `pressloop serve` sends through the same handler.
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


def configure_logging(settings: Settings, stream: IO[str] | None = None) -> str:
    """Send every logger (Pressloop's, uvicorn's, the libraries') through one handler on
    `stream` (stderr) in the configured format; returns the format used (`text` or `json`).
    Called once by `pressloop serve` and `pressloop worker` before anything logs."""
    stream = stream if stream is not None else sys.stderr
    chosen = resolved_format(settings.log_format, stream)
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter(settings_secrets(settings)))
    handler.setFormatter(JsonFormatter() if chosen == "json" else TextFormatter())
    handler.set_name(HANDLER_NAME)
    root = logging.getLogger()
    for old in list(root.handlers):  # called again: the new configuration replaces ours
        if old.get_name() == HANDLER_NAME:
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.log_level.upper())
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    for name in UVICORN_LOGGERS:  # no handlers of their own: through the root's
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    return chosen


RunBinding = tuple[Token[str], Token[str]]


def bind_run(run_id: str, thread_id: str) -> RunBinding:
    """From now on in this task (and the tasks it starts), records carry this run's ids;
    `unbind_run` puts back what was there (`run_logging` as a pair of calls)."""
    return _run_id.set(run_id), _thread_id.set(thread_id)


def unbind_run(binding: RunBinding) -> None:
    run_token, thread_token = binding
    _thread_id.reset(thread_token)
    _run_id.reset(run_token)
