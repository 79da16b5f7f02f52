"""Configuration from environment variables (and a `.env` file): DESIGN.md section 10.

Every time constant lives here so tests can shrink it; nothing else reads the environment.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

ProviderName = Literal[
    "openai", "anthropic", "openrouter", "glm", "openai-compatible", "local", "scripted"
]

DEFAULT_MODELS: dict[str, str] = {
    "openai": "gpt-5.2",
    "anthropic": "claude-3-5-sonnet-latest",
    "glm": "glm-5",
    "openrouter": "anthropic/claude-sonnet-4-5",
    "openai-compatible": "default",
    "scripted": "scripted",
    "local": "qwen2.5-coder-1.5b-instruct-q4_k_m",
}

DEFAULT_BASE_URLS: dict[str, str] = {
    "openrouter": "https://openrouter.ai/api/v1",
    "glm": "https://api.z.ai/api/paas/v4",
}


# The smallest PostgreSQL pool a process opens by default (a claim, a request, a read at once).
MIN_DB_POOL = 4


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _env(name: str, *more: str) -> AliasChoices:
    return AliasChoices(name, *more)


def _default_model_cache() -> Path:
    """Outside any checkout, so every clone and test run shares one downloaded model."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pressloop"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    data_dir: Path = Field(default=Path("data"), validation_alias=_env("PRESSLOOP_DATA_DIR"))
    database_url: str | None = Field(default=None, validation_alias=_env("PRESSLOOP_DATABASE_URL"))

    provider: ProviderName | None = Field(default=None, validation_alias=_env("PRESSLOOP_PROVIDER"))
    model: str | None = Field(default=None, validation_alias=_env("PRESSLOOP_MODEL"))
    base_url: str | None = Field(default=None, validation_alias=_env("PRESSLOOP_BASE_URL"))
    decision_protocol: Literal["auto", "tools", "json"] = Field(
        default="auto", validation_alias=_env("PRESSLOOP_DECISION_PROTOCOL")
    )
    # After a round whose actions were all writes that succeeded, end the turn with Pressloop's
    # account of them instead of another model call (engine/grounded.py). auto: for the local
    # model, whose second call costs seconds and may claim what did not happen.
    answer_from_results: Literal["auto", "on", "off"] = Field(
        default="auto", validation_alias=_env("PRESSLOOP_ANSWER_FROM_RESULTS")
    )
    script: Path | None = Field(default=None, validation_alias=_env("PRESSLOOP_SCRIPT"))

    openai_api_key: str | None = Field(default=None, validation_alias=_env("OPENAI_API_KEY"))
    openai_base_url: str | None = Field(default=None, validation_alias=_env("OPENAI_BASE_URL"))
    anthropic_api_key: str | None = Field(default=None, validation_alias=_env("ANTHROPIC_API_KEY"))
    anthropic_base_url: str | None = Field(
        default=None, validation_alias=_env("ANTHROPIC_BASE_URL")
    )
    openrouter_api_key: str | None = Field(
        default=None, validation_alias=_env("OPENROUTER_API_KEY")
    )
    zai_api_key: str | None = Field(default=None, validation_alias=_env("ZAI_API_KEY"))

    wp_url: str | None = Field(default=None, validation_alias=_env("PRESSLOOP_WP_URL"))
    wp_user: str | None = Field(default=None, validation_alias=_env("PRESSLOOP_WP_USER"))
    wp_app_password: str | None = Field(
        default=None, validation_alias=_env("PRESSLOOP_WP_APP_PASSWORD")
    )

    web_fetch_allow_private: bool = Field(
        default=False, validation_alias=_env("PRESSLOOP_WEB_FETCH_ALLOW_PRIVATE")
    )
    # web_fetch and upload_media from a URL: the longest wait for a page or file, and the
    # largest file uploaded to the media library (bytes).
    web_fetch_timeout_s: float = Field(
        default=15.0, validation_alias=_env("PRESSLOOP_WEB_FETCH_TIMEOUT")
    )
    media_max_bytes: int = Field(
        default=20 * 1024 * 1024, validation_alias=_env("PRESSLOOP_MEDIA_MAX_BYTES")
    )
    # WordPress REST calls: one request's timeout, retries of what may be retried, backoff.
    wp_timeout_s: float = Field(default=30.0, validation_alias=_env("PRESSLOOP_WP_TIMEOUT"))
    wp_retries: int = Field(default=2, validation_alias=_env("PRESSLOOP_WP_RETRIES"))
    wp_retry_base_s: float = Field(default=0.5, validation_alias=_env("PRESSLOOP_WP_RETRY_BASE"))
    wp_retry_cap_s: float = Field(default=8.0, validation_alias=_env("PRESSLOOP_WP_RETRY_CAP"))
    # `pressloop doctor` and `pressloop serve`'s start: how long a check of the site's
    # credentials or of the provider's key and address waits for an answer.
    check_timeout_s: float = Field(
        default=10.0, gt=0, validation_alias=_env("PRESSLOOP_CHECK_TIMEOUT")
    )
    # Extra action packs: comma-separated modules, each with an ACTIONS list of ActionSpec.
    action_packs: str = Field(default="", validation_alias=_env("PRESSLOOP_ACTION_PACKS"))

    disable_agent: bool = Field(default=False, validation_alias=_env("PRESSLOOP_DISABLE_AGENT"))

    host: str = Field(default="127.0.0.1", validation_alias=_env("PRESSLOOP_HOST"))
    port: int = Field(default=8780, validation_alias=_env("PRESSLOOP_PORT"))

    # Model calls.
    provider_timeout_s: float = Field(
        default=120.0, validation_alias=_env("PRESSLOOP_PROVIDER_TIMEOUT")
    )
    # Model calls one process keeps in flight to its provider (connections kept alive).
    provider_max_connections: int = Field(
        default=1000, ge=1, validation_alias=_env("PRESSLOOP_PROVIDER_MAX_CONNECTIONS")
    )
    provider_max_retries: int = Field(
        default=3, validation_alias=_env("PRESSLOOP_PROVIDER_RETRIES")
    )
    provider_retry_base_s: float = Field(
        default=0.5, validation_alias=_env("PRESSLOOP_PROVIDER_RETRY_BASE")
    )
    provider_retry_cap_s: float = Field(
        default=8.0, validation_alias=_env("PRESSLOOP_PROVIDER_RETRY_CAP")
    )
    max_output_tokens: int = Field(
        default=4096, validation_alias=_env("PRESSLOOP_MAX_OUTPUT_TOKENS")
    )

    # The local model (PRESSLOOP_PROVIDER=local): docs/configuration.md, "The local model".
    local_model: Path | None = Field(default=None, validation_alias=_env("PRESSLOOP_LOCAL_MODEL"))
    local_model_sha256: str | None = Field(
        default=None, validation_alias=_env("PRESSLOOP_LOCAL_MODEL_SHA256")
    )
    model_cache: Path = Field(
        default_factory=_default_model_cache, validation_alias=_env("PRESSLOOP_MODEL_CACHE")
    )
    model_index_url: str = Field(
        default="https://pypi.org/simple", validation_alias=_env("PRESSLOOP_MODEL_INDEX_URL")
    )
    model_download_timeout_s: float = Field(
        default=60.0, validation_alias=_env("PRESSLOOP_MODEL_DOWNLOAD_TIMEOUT")
    )
    # 0: one thread per core. One model answers one request at a time, with every core.
    local_threads: int = Field(default=0, validation_alias=_env("PRESSLOOP_LOCAL_THREADS"))
    local_context_tokens: int = Field(
        default=16384, validation_alias=_env("PRESSLOOP_LOCAL_CONTEXT")
    )
    # A decision is short; the cap keeps a runaway answer to seconds, not minutes, on 2 cores.
    local_max_tokens: int = Field(default=512, validation_alias=_env("PRESSLOOP_LOCAL_MAX_TOKENS"))
    local_batch_tokens: int = Field(default=512, validation_alias=_env("PRESSLOOP_LOCAL_BATCH"))
    # Keep the system prompt's evaluated state on disk, so a restart answers in seconds.
    local_keep_prefix: bool = Field(
        default=True, validation_alias=_env("PRESSLOOP_LOCAL_KEEP_PREFIX")
    )
    # llama.cpp's CPU variant (e.g. haswell, zen4): unset, the best one this CPU runs.
    local_cpu_variant: str | None = Field(
        default=None, validation_alias=_env("PRESSLOOP_LOCAL_CPU_VARIANT")
    )
    # How long the model's own process may take to start and load llama.cpp's CPU backend
    # (the model itself loads with the first request).
    local_start_timeout_s: float = Field(
        default=120.0, gt=0, validation_alias=_env("PRESSLOOP_LOCAL_START_TIMEOUT")
    )

    # The most database connections a process opens (PostgreSQL, opened lazily), the group
    # commit's included (with `commit_thread` the committer opens one more of its own): a worker
    # uses 2-3 whatever its concurrency (one group committer writes for all its runs); all
    # processes together must stay under the server's max_connections (docs/operations.md).
    # Unset: twice this machine's CPUs, at least 4 (`resolved_db_pool_size`). More connections
    # than the cores can serve only make transactions wait for each other's server processes:
    # under 200 streamed turns on 2 cores (2 serving processes, medians of 3 repeats), 20 + 10
    # gave the first token a p99 of 49-305 ms and 4 + 0 one of 19-28 ms, and the turns ended
    # sooner (docs/benchmarks.md, section 3a).
    db_pool_size: int | None = Field(
        default=None, ge=1, validation_alias=_env("PRESSLOOP_DB_POOL_SIZE")
    )
    db_max_overflow: int = Field(
        default=0, ge=0, validation_alias=_env("PRESSLOOP_DB_MAX_OVERFLOW")
    )
    # How long a transaction waits for a pooled connection before it fails (PostgreSQL).
    db_pool_timeout_s: float = Field(
        default=30.0, gt=0, validation_alias=_env("PRESSLOOP_DB_POOL_TIMEOUT")
    )
    # PostgreSQL: the group commit on an event loop of its own, on a thread (commit_loop.py).
    # Off by default: the two threads' handovers of the GIL and of each batch cost more CPU than
    # the main loop's wait they save, now that the loop is rarely that late (benchmarks.md, 3d).
    commit_thread: bool = Field(default=False, validation_alias=_env("PRESSLOOP_COMMIT_THREAD"))
    # The most runs one group commit writes. Its statements are built in one go on the main
    # loop, which reads no socket meanwhile: 100 runs' events held a stream's first token up to
    # 20 ms on a loaded 2-core machine, 25 at most a few (benchmarks.md, section 3g).
    commit_batch: int = Field(
        default=25, ge=1, le=1000, validation_alias=_env("PRESSLOOP_COMMIT_BATCH")
    )
    # Under load (more runs in flight in the process than the pending batch holds), how long a
    # group commit waits for the others' writes: fewer, fuller transactions, less CPU a run on
    # the event loop and in the database. What waits for a commit (a finish, the events sent
    # after theirs) waits that much longer; measured, the CPU fell and the latencies stayed
    # within noise, so it is off by default (benchmarks.md, section 3h). 0: write at once.
    commit_gather_s: float = Field(
        default=0.0, ge=0, le=1, validation_alias=_env("PRESSLOOP_COMMIT_GATHER")
    )
    # How long the text deltas a stream of this process has already sent may wait for their
    # commit (they are written for a reader in another process, a reconnect elsewhere): while
    # many streams receive tokens, fewer commits (`runtime/commits.py`; benchmarks.md, section
    # 3k). A delta no stream here sends is written at once. 0: every delta at once.
    delta_commit_s: float = Field(
        default=0.1, ge=0, le=5, validation_alias=_env("PRESSLOOP_DELTA_COMMIT")
    )
    # Work that can wait (a turn's next step, the next group commit) lets the event loop read its
    # sockets between two pieces, so a stream's token already in one goes out first
    # (`runtime/pacing.py`; benchmarks.md, section 3g).
    pacing: bool = Field(default=True, validation_alias=_env("PRESSLOOP_PACING"))
    # How long a SQLite writer waits for another process's write lock before it fails.
    db_busy_timeout_s: float = Field(
        default=30.0, gt=0, validation_alias=_env("PRESSLOOP_DB_BUSY_TIMEOUT")
    )

    # Runs, leases and retries (DESIGN.md section 8).
    lease_ttl_s: float = Field(default=30.0, validation_alias=_env("PRESSLOOP_LEASE_TTL"))
    lease_renew_s: float = Field(default=10.0, validation_alias=_env("PRESSLOOP_LEASE_RENEW"))
    approval_expiry_s: float = Field(
        default=3600.0, validation_alias=_env("PRESSLOOP_APPROVAL_EXPIRY")
    )
    # Daily budgets (0: no limit) and the per-user cooldown between messages (DESIGN.md 6).
    # Sized for a person's working day with the full catalog (docs/configuration.md, Budgets;
    # tests/runtime/test_budgets.py measures it): 100 turns of 2 model calls and 2 actions.
    budget_user_actions: int = Field(
        default=300, validation_alias=_env("PRESSLOOP_BUDGET_USER_ACTIONS")
    )
    budget_user_tokens: int = Field(
        default=3_000_000, validation_alias=_env("PRESSLOOP_BUDGET_USER_TOKENS")
    )
    budget_site_actions: int = Field(
        default=1_500, validation_alias=_env("PRESSLOOP_BUDGET_SITE_ACTIONS")
    )
    budget_site_tokens: int = Field(
        default=15_000_000, validation_alias=_env("PRESSLOOP_BUDGET_SITE_TOKENS")
    )
    cooldown_s: float = Field(default=5.0, validation_alias=_env("PRESSLOOP_COOLDOWN"))
    max_attempts: int = Field(default=5, validation_alias=_env("PRESSLOOP_MAX_ATTEMPTS"))
    backoff_base_s: float = Field(default=2.0, validation_alias=_env("PRESSLOOP_BACKOFF_BASE"))
    backoff_cap_s: float = Field(default=600.0, validation_alias=_env("PRESSLOOP_BACKOFF_CAP"))
    usage_flush_s: float = Field(default=1.0, validation_alias=_env("PRESSLOOP_USAGE_FLUSH"))
    worker_poll_s: float = Field(default=0.5, validation_alias=_env("PRESSLOOP_WORKER_POLL"))
    # PostgreSQL, while its notifications reach the worker (`store/notify.py`): an idle worker
    # waits until the next backoff ends or lease expires, at most this long, instead of polling.
    worker_idle_poll_s: float = Field(
        default=5.0, gt=0, validation_alias=_env("PRESSLOOP_WORKER_IDLE_POLL")
    )
    worker_concurrency: int = Field(
        default=8, validation_alias=_env("PRESSLOOP_WORKER_CONCURRENCY")
    )
    # `pressloop serve` runs turns itself (its worker, and runs started by a request); off,
    # only `pressloop worker` processes run them (docs/operations.md).
    serve_runs: bool = Field(default=True, validation_alias=_env("PRESSLOOP_SERVE_RUNS"))
    # `pressloop serve` as this many processes on one port (`serve_processes.py`): each serves
    # and runs about 1/N of the connections. Above 1, meant for PostgreSQL (on SQLite the
    # processes' writes wait for each other's lock).
    serve_processes: int = Field(
        default=1, ge=1, le=64, validation_alias=_env("PRESSLOOP_SERVE_PROCESSES")
    )
    # The cyclic garbage collector's thresholds in `pressloop serve` and `pressloop worker`
    # (`runtime/collector.py`): three numbers, `gc.set_threshold`'s; '' for the process's own.
    gc_thresholds: str = Field(
        default="",
        pattern=r"^\s*(\d+\s*,\s*\d+\s*,\s*\d+\s*)?$",
        validation_alias=_env("PRESSLOOP_GC_THRESHOLDS"),
    )
    # `pressloop serve` collects (the young generation, or the middle one when due) whenever no
    # collection ran for this long (0: only at the interpreter's thresholds; runtime/collector.py).
    gc_young_every_s: float = Field(
        default=0.05, ge=0, validation_alias=_env("PRESSLOOP_GC_YOUNG_EVERY")
    )
    # `pressloop serve`'s event loop (`runtime/loop_lanes.py`): "lanes" is asyncio's loop with an
    # urgent lane, where a turn reading a model's stream goes ahead of other work; "uvloop" runs
    # everything first in, first out, on a little less CPU a turn.
    event_loop: Literal["lanes", "uvloop"] = Field(
        default="lanes", validation_alias=_env("PRESSLOOP_EVENT_LOOP")
    )
    # On "lanes": the longest the loop goes without polling its sockets while it has work queued.
    loop_poll_every_s: float = Field(
        default=0.001, gt=0, le=1, validation_alias=_env("PRESSLOOP_LOOP_POLL_EVERY")
    )
    # Cancel (DESIGN.md section 8): how often a process looks for cancels asked elsewhere for
    # the runs it runs, and how long a cancel request waits for a running run to stop.
    cancel_poll_s: float = Field(default=0.5, gt=0, validation_alias=_env("PRESSLOOP_CANCEL_POLL"))
    cancel_wait_s: float = Field(default=2.0, ge=0, validation_alias=_env("PRESSLOOP_CANCEL_WAIT"))
    scheduler_poll_s: float = Field(default=5.0, validation_alias=_env("PRESSLOOP_SCHEDULER_POLL"))
    event_poll_s: float = Field(default=0.2, validation_alias=_env("PRESSLOOP_EVENT_POLL"))

    # Metrics and logs (docs/operations.md, "Metrics and logs"): `pressloop serve`'s /metrics
    # needs an admin token unless PRESSLOOP_METRICS_PUBLIC (loopback or private address only);
    # a worker serves its own on PRESSLOOP_METRICS_PORT (off when unset) at METRICS_HOST;
    # histogram buckets in seconds, comma-separated ('' for the defaults); log format and level.
    metrics_public: bool = Field(default=False, validation_alias=_env("PRESSLOOP_METRICS_PUBLIC"))
    metrics_port: int | None = Field(
        default=None, ge=0, le=65535, validation_alias=_env("PRESSLOOP_METRICS_PORT")
    )
    metrics_host: str = Field(default="127.0.0.1", validation_alias=_env("PRESSLOOP_METRICS_HOST"))
    metrics_run_buckets: str = Field(
        default="", validation_alias=_env("PRESSLOOP_METRICS_RUN_BUCKETS")
    )
    metrics_model_buckets: str = Field(
        default="", validation_alias=_env("PRESSLOOP_METRICS_MODEL_BUCKETS")
    )
    log_format: Literal["auto", "text", "json"] = Field(
        default="auto", validation_alias=_env("PRESSLOOP_LOG_FORMAT")
    )
    log_level: Literal["debug", "info", "warning", "error", "DEBUG", "INFO", "WARNING", "ERROR"] = (
        Field(default="info", validation_alias=_env("PRESSLOOP_LOG_LEVEL"))
    )

    # Requests.
    max_message_chars: int = Field(
        default=32_000, validation_alias=_env("PRESSLOOP_MAX_MESSAGE_CHARS")
    )
    wait_timeout_s: float = Field(default=900.0, validation_alias=_env("PRESSLOOP_WAIT_TIMEOUT"))
    # The largest request body in bytes, counted as it arrives (chunked too): unset, room for a
    # message of max_message_chars (api/body_limit.py).
    max_body_bytes: int | None = Field(
        default=None, gt=0, validation_alias=_env("PRESSLOOP_MAX_BODY_BYTES")
    )
    # Serve /docs (Swagger UI, from local files) and /openapi.json.
    api_docs: bool = Field(default=True, validation_alias=_env("PRESSLOOP_API_DOCS"))

    # Access (docs/operations.md, "Tokens and sessions"): how long a UI sign-in lasts, how
    # often a token's last use is written, and failed sign-ins allowed per address per window.
    ui_session_lifetime_s: float = Field(
        default=12 * 3600.0, gt=0, validation_alias=_env("PRESSLOOP_UI_SESSION_LIFETIME")
    )
    token_touch_interval_s: float = Field(
        default=60.0, ge=0, validation_alias=_env("PRESSLOOP_TOKEN_TOUCH_INTERVAL")
    )
    sign_in_max_failures: int = Field(
        default=10, ge=1, validation_alias=_env("PRESSLOOP_SIGN_IN_MAX_FAILURES")
    )
    sign_in_window_s: float = Field(
        default=60.0, gt=0, validation_alias=_env("PRESSLOOP_SIGN_IN_WINDOW")
    )

    # Outbound requests the agent makes (web_fetch, upload_media from a URL): the hosts the owner
    # allows, comma-separated; `example.com` is that host, `.wordpress.org` the domain and every
    # name under it (pressloop/actions/net/allowlist.py). Empty: no host is allowed.
    net_allow: str = Field(default="", validation_alias=_env("PRESSLOOP_NET_ALLOW"))

    # MCP servers whose tools the agent uses (docs/configuration.md, "MCP servers"): a file in
    # the desktop agents' format (unset: `<data dir>/mcp.json` when it exists), beside the
    # servers stored in the settings; each call's deadline (a server may set its own), and the
    # full-jitter backoff between restarts of a server that keeps dying.
    mcp_config: Path | None = Field(default=None, validation_alias=_env("PRESSLOOP_MCP_CONFIG"))
    mcp_timeout_s: float = Field(default=30.0, gt=0, validation_alias=_env("PRESSLOOP_MCP_TIMEOUT"))
    mcp_restart_base_s: float = Field(
        default=0.5, gt=0, validation_alias=_env("PRESSLOOP_MCP_RESTART_BASE")
    )
    mcp_restart_cap_s: float = Field(
        default=30.0, gt=0, validation_alias=_env("PRESSLOOP_MCP_RESTART_CAP")
    )
    # How long a turn waits for servers still starting (their tools come in a later turn).
    mcp_list_wait_s: float = Field(
        default=10.0, ge=0, validation_alias=_env("PRESSLOOP_MCP_LIST_WAIT")
    )
    # How often a process looks at the mcp.json file (its modification time) and the servers
    # stored in the settings again.
    mcp_config_poll_s: float = Field(
        default=5.0, ge=0, validation_alias=_env("PRESSLOOP_MCP_CONFIG_POLL")
    )
    # Pressloop's own MCP server (`/mcp`, `pressloop mcp`): how long a tool call waits for its
    # run before answering "still running" with the run's id.
    mcp_call_wait_s: float = Field(
        default=300.0, gt=0, validation_alias=_env("PRESSLOOP_MCP_CALL_WAIT")
    )

    def mcp_config_path(self) -> Path | None:
        """The mcp.json to read: the one named, else the data directory's if it exists."""
        if self.mcp_config is not None:
            return self.mcp_config
        default = self.data_dir / "mcp.json"
        return default if default.exists() else None

    def resolved_db_pool_size(self, cpus: int | None = None) -> int:
        """The pool of each process: the setting, else twice the CPUs (this machine's unless
        given) shared by the serving processes of one machine, at least MIN_DB_POOL."""
        if self.db_pool_size is not None:
            return self.db_pool_size
        cpus = usable_cpus() if cpus is None else cpus
        return max(MIN_DB_POOL, 2 * cpus // self.serve_processes)

    def resolved_gc_thresholds(self, default: tuple[int, int, int]) -> tuple[int, int, int]:
        """PRESSLOOP_GC_THRESHOLDS, else the process's `default`."""
        if not self.gc_thresholds.strip():
            return default
        young, middle, old = (int(part) for part in self.gc_thresholds.split(","))
        return young, middle, old

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'pressloop.db').resolve()}"
