"""One error tree for the whole service.

- `ConfigurationError`: the person's mistake (a missing key, a bad setting). Never retried.
- `RunFailure`: something a run met (model, site, limits). Each knows whether a retry may help.
The HTTP layer maps these to statuses in one place.
"""

from __future__ import annotations

from pressloop.contracts import ErrorInfo


class PressloopError(Exception):
    """Base of every error Pressloop raises on purpose."""

    code = "error"
    retryable = False

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        if retryable is not None:
            self.retryable = retryable

    def info(self) -> ErrorInfo:
        return ErrorInfo(cls=type(self).__name__, message=self.message, retryable=self.retryable)


class ConfigurationError(PressloopError):
    code = "configuration_error"


class ProviderNotConfigured(ConfigurationError):
    code = "provider_not_configured"


class AgentDisabled(ConfigurationError):
    code = "agent_disabled"


class RunFailure(PressloopError):
    code = "run_failed"


class ProviderError(RunFailure):
    """The model provider failed: `retryable` for 429, 5xx, timeouts and network errors."""

    code = "provider_error"


class InvalidModelOutput(RunFailure):
    code = "invalid_model_output"


class ScriptExhausted(ProviderError):
    code = "script_exhausted"


class LimitExceeded(RunFailure):
    code = "limit_exceeded"


class ActionError(RunFailure):
    """An action failed; the model is told and may correct itself.

    `outcome_unknown`: a write was sent and its answer does not say whether it took effect (a
    timeout, a cut-off or unreadable body, a 5xx): the executor reconciles before anything else.
    """

    code = "action_error"
    outcome_unknown = False


class SiteError(ActionError):
    """The site (WordPress) answered an action's call with an error: `status` is its HTTP
    status and `site_code` the site's own error code (404, "rest_post_invalid_id"), so the
    model, the ledger and the events can name both."""

    code = "site_error"

    def __init__(
        self,
        message: str,
        *,
        status: int,
        site_code: str | None = None,
        retryable: bool | None = None,
        signed_out: bool = False,
    ) -> None:
        super().__init__(message, retryable=retryable)
        self.status = status
        self.site_code = site_code
        # WordPress read the call as an anonymous visitor's: the credentials are wrong.
        self.signed_out = signed_out


class LeaseLost(RunFailure):
    """This worker no longer holds the run's lease: another worker took it over."""

    code = "lease_lost"


class NotFound(PressloopError):
    code = "not_found"


class Conflict(PressloopError):
    code = "conflict"


class InvalidRequest(PressloopError):
    code = "invalid_request"


class PayloadTooLarge(InvalidRequest):
    code = "payload_too_large"


class RateLimited(PressloopError):
    """Too soon after the person's previous message (the per-user cooldown)."""

    code = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class BudgetExceeded(RunFailure):
    """A daily budget (actions or tokens, per user or per site) is used up."""

    code = "budget_exceeded"


class BudgetSpent(RateLimited):
    """A new turn asked for while a daily budget is used up: refused before anything is stored,
    with the time until the budget resets (HTTP 429 with Retry-After)."""

    code = "budget_exceeded"
