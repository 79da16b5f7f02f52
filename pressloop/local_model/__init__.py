"""The local model's file: where it comes from, fetching it once, checking it, placing it."""

from pressloop.local_model.errors import ModelIntegrityError, ModelUnavailable
from pressloop.local_model.prepare import ModelPlace, prepare, ready_model
from pressloop.local_model.source import DEFAULT_SOURCE, ModelSource

__all__ = [
    "DEFAULT_SOURCE",
    "ModelIntegrityError",
    "ModelPlace",
    "ModelSource",
    "ModelUnavailable",
    "prepare",
    "ready_model",
]
