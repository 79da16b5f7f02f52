"""MCP tools as Pressloop actions: one `ActionSpec` per tool, named `server.tool`.

The risk comes from the tool's annotations (readOnlyHint -> read, destructiveHint ->
destructive, otherwise write), unless the owner set one for the server or the tool (`off`
leaves the tool out). Params are the JSON object the tool's inputSchema describes, validated
with jsonschema by the draft its `$schema` declares (2020-12 when it declares none); the model
is shown the schema without `$schema`. Results are content others wrote, so every result is
untrusted.

A tool whose `execution.taskSupport` is "required" can only be run as an MCP task (the server
answers a plain tools/call with an error); Pressloop does not run tasks, so such a tool is left
out, as if the owner had turned it off.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any, ClassVar

import jsonschema  # type: ignore[import-untyped]  # no stubs; two calls used
from mcp import types as mcp_types
from pydantic import RootModel, model_validator
from pydantic_core import PydanticCustomError

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec, Handler
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError
from pressloop.mcp.config import ToolRisk
from pressloop.mcp.connection import McpConnection
from pressloop.mcp.errors import McpServerError

SEPARATOR = "."
# What the model reads of one result: long enough for a page of text, short of a flood.
MAX_RESULT_CHARS = 20_000


class ToolParams(RootModel[dict[str, Any]]):
    """The params of one MCP tool: the JSON object itself, checked against `input_schema`.
    Each tool gets its own subclass (`params_model`); the registry's catalog shows the
    tool's own schema, as the server wrote it."""

    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    validator_class: ClassVar[Any] = jsonschema.Draft202012Validator  # its $schema's draft

    @model_validator(mode="after")
    def _fits_schema(self) -> ToolParams:
        validator = self.validator_class(self.input_schema)
        problems = sorted(validator.iter_errors(self.root), key=lambda e: list(e.absolute_path))
        if problems:
            text = "; ".join(_problem(problem) for problem in problems[:8])
            raise PydanticCustomError("json_schema", "{problems}", {"problems": text})
        return self

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The tool's schema as the model reads it: `$schema` (which draft) says nothing to it."""
        schema = copy.deepcopy(cls.input_schema)
        schema.pop("$schema", None)
        return schema


def _problem(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def params_model(name: str, input_schema: dict[str, Any]) -> type[ToolParams]:
    """A params model for one tool's inputSchema (refused at once if the schema is broken)."""
    schema = dict(input_schema) or {"type": "object"}
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator.check_schema(schema)
    model_name = "".join(part.capitalize() for part in _words(name)) + "Params"
    fields = {"input_schema": schema, "validator_class": validator, "__module__": __name__}
    return type(model_name, (ToolParams,), fields)


def _words(name: str) -> list[str]:
    return [word for word in "".join(c if c.isalnum() else " " for c in name).split() if word]


def tool_risk(tool: mcp_types.Tool, override: ToolRisk | None) -> Risk | None:
    """The owner's word first; else the tool's hints; None: the owner turned it off."""
    if override is ToolRisk.OFF:
        return None
    if override is not None:
        return Risk(override.value)
    hints = tool.annotations
    if hints is not None and hints.read_only_hint:
        return Risk.READ
    if hints is not None and hints.destructive_hint:
        return Risk.DESTRUCTIVE
    return Risk.WRITE


def result_text(result: mcp_types.CallToolResult) -> str:
    """The text the model reads: the text parts joined, other parts named."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        else:
            parts.append(f"[{block.type} content not shown]")
    if not parts and result.structured_content is not None:
        parts.append(str(result.structured_content))
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[cut: {len(text) - MAX_RESULT_CHARS} more chars]"
    return text


def needs_tasks(tool: mcp_types.Tool) -> bool:
    """Whether the tool runs only as an MCP task, which Pressloop cannot call."""
    return tool.execution is not None and tool.execution.task_support == "required"


def tool_spec(connection: McpConnection, tool: mcp_types.Tool) -> ActionSpec | None:
    """The action for one tool of a connected server, or None when the owner turned it off or
    it runs only as a task."""
    if needs_tasks(tool):
        return None
    risk = tool_risk(tool, connection.server.override(tool.name))
    if risk is None:
        return None
    name = f"{connection.name}{SEPARATOR}{tool.name}"
    description = (tool.description or tool.title or tool.name).strip()
    return ActionSpec(
        name=name,
        description=f"{description} (MCP server {connection.name})",
        params=params_model(name, tool.input_schema),
        risk=risk,
        handler=_handler(connection, tool.name, risk),
        untrusted_output=True,
        server=connection.name,
        idempotent=bool(tool.annotations and tool.annotations.idempotent_hint),
    )


def _handler(connection: McpConnection, tool: str, risk: Risk) -> Handler:
    async def call(params: ToolParams, _c: ActionContext, _s: ActionServices) -> ActionResult:
        try:
            result = await connection.call_tool(tool, params.root)
        except McpServerError as failure:
            # The model is told and may carry on without the tool: the run is not retried for
            # it. A write cut short may still have taken effect, which the executor reports.
            raise McpServerError(
                connection.name,
                failure.message.split(": ", 1)[-1],
                retryable=False,
                outcome_unknown=failure.outcome_unknown and risk is not Risk.READ,
            ) from None
        text = result_text(result)
        if result.is_error:
            raise ActionError(f"the tool answered with an error: {text or '(no text)'}")
        summary = f"{connection.name}{SEPARATOR}{tool}: {len(text)} chars"
        return ActionResult(content=text, summary=summary, untrusted=True)

    return call


async def server_specs(connection: McpConnection) -> list[ActionSpec]:
    """The actions of one server's tools (starts the server if it is not running)."""
    specs = []
    for tool in await connection.tools():
        spec = tool_spec(connection, tool)
        if spec is not None:
            specs.append(spec)
    return specs


async def catalog_specs(connections: Iterable[McpConnection]) -> list[ActionSpec]:
    """The actions of every server's tools; a server that cannot start is left out (its
    tools are unavailable, the others still work) and named in the returned errors."""
    specs, _errors = await catalog_specs_and_errors(connections)
    return specs


async def catalog_specs_and_errors(
    connections: Iterable[McpConnection],
) -> tuple[list[ActionSpec], list[McpServerError]]:
    specs: list[ActionSpec] = []
    errors: list[McpServerError] = []
    for connection in connections:
        try:
            specs.extend(await server_specs(connection))
        except McpServerError as failure:
            errors.append(failure)
    return specs, errors
