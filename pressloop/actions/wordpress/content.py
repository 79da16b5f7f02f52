"""The content part of the WordPress action pack: posts and pages, categories and tags.

Posts and pages live in `posts` (and `post_create`), categories and tags in `terms`; this
module gathers them.
"""

from __future__ import annotations

from pressloop.actions.registry import ActionSpec
from pressloop.actions.wordpress.blocks import blocks
from pressloop.actions.wordpress.post_create import CREATE_POST
from pressloop.actions.wordpress.posts import POST_ACTIONS
from pressloop.actions.wordpress.terms import TERM_ACTIONS

CONTENT_ACTIONS: tuple[ActionSpec, ...] = (*POST_ACTIONS, CREATE_POST, *TERM_ACTIONS)

__all__ = ["CONTENT_ACTIONS", "POST_ACTIONS", "TERM_ACTIONS", "blocks"]
