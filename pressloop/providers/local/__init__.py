"""The local provider: llama.cpp in-process (the optional `local` dependency group).

`llama_cpp` is imported only here, when the local provider is asked for, so the service runs
without the group installed; asking for it then gives a clear message naming the command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pressloop.config import DEFAULT_MODELS, Settings
from pressloop.errors import ConfigurationError

if TYPE_CHECKING:
    from pressloop.providers.local.provider import LocalProvider

MISSING_GROUP = (
    "PRESSLOOP_PROVIDER=local needs llama-cpp-python, from the optional `local` dependency "
    "group, which is not installed: run `make run` (it installs the group and prepares the "
    "model) or `.venv-tools/bin/uv sync --group local` (compiles llama.cpp, 4-6 minutes)"
)


def build_local_provider(settings: Settings) -> LocalProvider:
    """The local provider for `settings`; the model file must be ready (checked, not loaded)."""
    try:
        from pressloop.providers.local.model import LocalModel, ModelOptions
        from pressloop.providers.local.provider import LocalProvider
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] != "llama_cpp":
            raise
        raise ConfigurationError(MISSING_GROUP) from exc
    from pressloop.local_model import ModelPlace, ready_model

    place = ModelPlace.from_settings(settings)
    path = ready_model(place)
    name = settings.model or (path.stem if place.custom else DEFAULT_MODELS["local"])
    model = LocalModel(
        ModelOptions(
            path=path,
            threads=settings.local_threads,
            context_tokens=settings.local_context_tokens,
            batch_tokens=settings.local_batch_tokens,
            prefix_dir=place.data_dir / "models" / "prefix-states"
            if settings.local_keep_prefix
            else None,
        )
    )
    return LocalProvider(model, name=name, max_tokens=settings.local_max_tokens)
