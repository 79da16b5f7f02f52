"""The errors of the MCP client: one for a server that failed us, whatever the transport."""

from __future__ import annotations

from pressloop.errors import ActionError


class McpServerError(ActionError):
    """An outside MCP server could not start, died, hung, or broke the protocol.

    An `ActionError` because it happens inside an action's step: the executor tells the model
    (and the ledger) what happened. `retryable`: a later call may work (the server is restarted
    on next use); `outcome_unknown`: the call was sent and its effect is not known (it died or
    timed out mid-call). The message names the server and never carries its env or headers.
    """

    code = "mcp_server_error"

    def __init__(
        self,
        server: str,
        message: str,
        *,
        retryable: bool = True,
        outcome_unknown: bool = False,
    ) -> None:
        super().__init__(f"MCP server {server!r}: {message}", retryable=retryable)
        self.server = server
        self.outcome_unknown = outcome_unknown
