"""A private WordPress on loopback for the tests and for `make run` (see `local_site`)."""

from pressloop.local_wordpress.host import (
    DEBIAN_PACKAGES,
    LocalSiteError,
    missing_packages,
    require_packages,
)
from pressloop.local_wordpress.local_site import LocalSite

__all__ = ["DEBIAN_PACKAGES", "LocalSite", "LocalSiteError", "missing_packages", "require_packages"]
