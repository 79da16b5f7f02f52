"""The WordPress action pack: the REST client (`client`) and, on top of it, the actions."""

from pressloop.actions.wordpress.admin import ADMIN_ACTIONS
from pressloop.actions.wordpress.client import WordPressClient, WordPressResponse
from pressloop.actions.wordpress.content import CONTENT_ACTIONS
from pressloop.actions.wordpress.site import WordPressSite
from pressloop.actions.wordpress.site_context import SITE_CONTEXT_ACTIONS

WORDPRESS_ACTIONS = (*CONTENT_ACTIONS, *ADMIN_ACTIONS, *SITE_CONTEXT_ACTIONS)

__all__ = ["WORDPRESS_ACTIONS", "WordPressClient", "WordPressResponse", "WordPressSite"]
