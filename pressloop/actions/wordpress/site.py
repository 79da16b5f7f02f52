"""What the WordPress pack adds to every run when a site is configured, built from Settings."""

from __future__ import annotations

from dataclasses import dataclass

from pressloop.actions.wordpress.client import WordPressClient
from pressloop.actions.wordpress.site_context import SiteContextCache
from pressloop.config import Settings


@dataclass(kw_only=True, frozen=True)
class WordPressSite:
    """The site's REST client (for `ActionServices.wordpress`) and its SITE_CONTEXT source."""

    client: WordPressClient
    site_context: SiteContextCache

    @classmethod
    def from_settings(cls, settings: Settings) -> WordPressSite:
        client = WordPressClient.from_settings(settings)
        return cls(client=client, site_context=SiteContextCache(client))
