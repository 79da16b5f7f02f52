"""The local model's settings (PRESSLOOP_PROVIDER=local): docs/configuration.md, "The local
model". A base of `Settings`; read them there."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings

from pressloop.config.env import env as _env


def _default_model_cache() -> Path:
    """Outside any checkout, so every clone and test run shares one downloaded model."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pressloop"


class LocalModelSettings(BaseSettings):
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
