"""Pressloop as an MCP server (DESIGN.md section 10, `/mcp`): outside agents chat with Pressloop's
agent, call its actions one by one and decide approvals, through the same runs, policies (trigger
`mcp`) and approvals as everything else.

Two transports over one server (`server.py`): streamable HTTP at `/mcp` inside the app
`pressloop serve` runs (`http.py`, the API's bearer tokens and roles) and stdio (`stdio.py`,
`pressloop mcp`, acting as the local user). Not `pressloop.mcp`, which is the client of outside
MCP servers, below the engine; this package sits beside the API.
"""
