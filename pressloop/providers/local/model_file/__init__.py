"""The local model's file: where it comes from, fetching it once, checking it, placing it."""

from pressloop.providers.local.model_file.errors import ModelIntegrityError, ModelUnavailable
from pressloop.providers.local.model_file.prepare import ModelPlace, prepare, ready_model
from pressloop.providers.local.model_file.source import DEFAULT_SOURCE, ModelSource

__all__ = [
    "DEFAULT_SOURCE",
    "ModelIntegrityError",
    "ModelPlace",
    "ModelSource",
    "ModelUnavailable",
    "prepare",
    "ready_model",
]
