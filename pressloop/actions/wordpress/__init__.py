"""The WordPress action pack: the REST client (`client`) and, on top of it, the actions."""

from pressloop.actions.wordpress.client import WordPressClient, WordPressResponse

__all__ = ["WordPressClient", "WordPressResponse"]
