"""The local provider: llama.cpp in a process of its own (the optional `local` dependency group).

The service itself never imports `llama_cpp`: the model process does (`model_server.py`), so
the service runs without the group installed; asking for the provider then gives a clear
message naming the command.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from pressloop.config import DEFAULT_MODELS, Settings
from pressloop.errors import ConfigurationError

if TYPE_CHECKING:
    from pressloop.providers.local.model import LocalModel
    from pressloop.providers.local.options import ModelOptions
    from pressloop.providers.local.provider import LocalProvider

MISSING_GROUP = (
    "PRESSLOOP_PROVIDER=local needs llama-cpp-python, from the optional `local` dependency "
    "group, which is not installed: run `make run` (it installs the group and prepares the "
    "model) or `.venv-tools/bin/uv sync --group local` (compiles llama.cpp, about 15 minutes "
    "on 2 cores)"
)


def model_options(settings: Settings) -> tuple[ModelOptions, str]:
    """The model's options for `settings` (the file must be ready: checked, not loaded), and
    the name the provider reports."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise ConfigurationError(MISSING_GROUP)
    from pressloop.providers.local.model_file import ModelPlace, ready_model
    from pressloop.providers.local.options import ModelOptions

    place = ModelPlace.from_settings(settings)
    path = ready_model(place)
    name = settings.model or (path.stem if place.custom else DEFAULT_MODELS["local"])
    options = ModelOptions(
        path=path,
        threads=settings.local_threads,
        context_tokens=settings.local_context_tokens,
        batch_tokens=settings.local_batch_tokens,
        prefix_dir=place.data_dir / "models" / "prefix-states"
        if settings.local_keep_prefix
        else None,
        cpu_variant=settings.local_cpu_variant,
    )
    return options, name


def build_local_provider(settings: Settings) -> LocalProvider:
    """The local provider for `settings`: its model process starts with the first request."""
    options, name = model_options(settings)  # first: it says when llama.cpp is missing
    from pressloop.providers.local.model_process import ModelProcess
    from pressloop.providers.local.provider import LocalProvider

    process = ModelProcess(options, start_timeout_s=settings.local_start_timeout_s)
    return LocalProvider(process, name=name, max_tokens=settings.local_max_tokens)


def build_local_model(settings: Settings) -> LocalModel:
    """The model in this very process (loads llama.cpp here): for `prepare` and benchmarks,
    which are processes of their own; the service uses `build_local_provider`."""
    options, _name = model_options(settings)
    from pressloop.providers.local.model import LocalModel

    return LocalModel(options)
