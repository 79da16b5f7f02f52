"""Configuration from environment variables (and a `.env` file): DESIGN.md section 10.

Every time constant lives in this package so tests can shrink it; nothing else reads the
environment. `Settings` is one object; the local model's settings (`local_model.py`) and how a
serving process spends its CPU and its database connections (`serving.py`) are its bases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from pressloop.config.env import env as _env
from pressloop.config.local_model import LocalModelSettings
from pressloop.config.serving import ServingTuning

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


class Settings(LocalModelSettings, ServingTuning, BaseSettings):
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
    # Stopping (SIGTERM, SIGINT): how long running turns get to reach a resting state before
    # they are cancelled and handed back to the queue (another worker resumes them), and
    # how long a process's close may take after that (its last writes, its connections) before
    # the process that started it (the first serving process, for the other serving processes
    # and the stream processes) kills it.
    shutdown_grace_s: float = Field(
        default=10.0, ge=0, validation_alias=_env("PRESSLOOP_SHUTDOWN_GRACE")
    )
    stop_timeout_s: float = Field(
        default=20.0, gt=0, validation_alias=_env("PRESSLOOP_STOP_TIMEOUT")
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

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'pressloop.db').resolve()}"
