"""The admin UI at `/ui`: server-rendered pages with small scripts, served by `pressloop serve`.

Pages read through the same `Service` as the API; every change a page makes goes through the
`/v1` API from the browser (signed in with the session cookie), so the API's roles and checks are
the only ones there are.
"""

from pressloop.ui.app import mount_ui

__all__ = ["mount_ui"]
