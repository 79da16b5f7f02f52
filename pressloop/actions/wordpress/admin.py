"""Site administration actions of the WordPress pack: users, plugins, settings, themes,
comments and media (DESIGN.md section 5). Each part lives in its own module."""

from __future__ import annotations

from pressloop.actions.registry import ActionSpec
from pressloop.actions.wordpress.comment_delete import DELETE_COMMENT
from pressloop.actions.wordpress.comments import COMMENT_ACTIONS
from pressloop.actions.wordpress.media import MEDIA_ACTIONS
from pressloop.actions.wordpress.media_upload import UPLOAD_MEDIA
from pressloop.actions.wordpress.settings_plugins import SETTINGS_PLUGIN_ACTIONS
from pressloop.actions.wordpress.user_roles import USER_ROLE_ACTIONS
from pressloop.actions.wordpress.users import USER_ACTIONS

ADMIN_ACTIONS: tuple[ActionSpec, ...] = (
    *USER_ACTIONS,
    *USER_ROLE_ACTIONS,
    *SETTINGS_PLUGIN_ACTIONS,
    *COMMENT_ACTIONS,
    DELETE_COMMENT,
    *MEDIA_ACTIONS,
    UPLOAD_MEDIA,
)

__all__ = ["ADMIN_ACTIONS"]
