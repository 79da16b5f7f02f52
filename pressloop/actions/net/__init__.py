"""Outbound requests the agent makes (web_fetch, upload_media from a URL): which hosts the owner
allows (`host_allowed`), which addresses may be reached (`refusal`), and `fetch`, which connects
only to an address it checked."""

from pressloop.actions.net.addresses import refusal
from pressloop.actions.net.allowlist import host_allowed, parse_allowlist
from pressloop.actions.net.fetch import Fetched, NetRules, fetch, fetch_public, rules_from

__all__ = [
    "Fetched",
    "NetRules",
    "fetch",
    "fetch_public",
    "host_allowed",
    "parse_allowlist",
    "refusal",
    "rules_from",
]
