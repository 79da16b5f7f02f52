"""What can go wrong while preparing a local model: both are the person's to fix."""

from __future__ import annotations

from pressloop.errors import ConfigurationError


class ModelIntegrityError(ConfigurationError):
    """A model file (or a downloaded part) is not the one expected: wrong size or sha256."""

    code = "model_integrity"


class ModelUnavailable(ConfigurationError):
    """The model file is not there and cannot be fetched (no network, no such package)."""

    code = "model_unavailable"
