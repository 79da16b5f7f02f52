"""The local WordPress the tests use: it answers, signs in, and resets between tests."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import httpx
import pytest

from pressloop.errors import ConfigurationError
from pressloop.local_wordpress import LocalSite, LocalSiteError, host


def _admin(site: LocalSite) -> httpx.Client:
    return httpx.Client(
        base_url=f"{site.url}/wp-json", auth=(site.admin_user, site.app_password), timeout=10
    )


def test_the_site_answers_its_rest_index(wordpress: LocalSite) -> None:
    index = httpx.get(f"{wordpress.url}/wp-json/", timeout=10).json()
    assert index["name"] == wordpress.title
    assert index["url"] == wordpress.url
    assert "/wp/v2/posts" in index["routes"]
    assert "application-passwords" in index["authentication"]


def test_the_application_password_signs_in_as_the_admin(wordpress: LocalSite) -> None:
    with _admin(wordpress) as admin:
        me = admin.get("/wp/v2/users/me", params={"context": "edit"}).json()
    assert me["username"] == wordpress.admin_user
    assert me["roles"] == ["administrator"]

    wrong = httpx.get(
        f"{wordpress.url}/wp-json/wp/v2/users/me",
        auth=(wordpress.admin_user, "not the password"),
        timeout=10,
    )
    assert wrong.status_code == 401


def test_the_sites_database_keeps_its_temporary_tables_in_its_own_home(
    wordpress: LocalSite,
) -> None:
    # Not the shared /tmp, where another MariaDB starting at the same moment removed them.
    tmpdir = Path(wordpress.sql("SELECT @@tmpdir").strip())
    assert tmpdir == wordpress.home / "mysql-tmp"
    assert tmpdir.is_dir()


def test_restore_puts_back_the_database_plugins_and_ids(wordpress: LocalSite) -> None:
    with _admin(wordpress) as admin:
        created = admin.post("/wp/v2/posts", json={"title": "Gone soon", "status": "publish"})
        assert created.status_code == 201
        post_id = created.json()["id"]
        deleted = admin.delete("/wp/v2/plugins/pressloop-test-plugin")
        assert deleted.status_code == 200, deleted.text
        assert not (wordpress.docroot / "wp-content/plugins/pressloop-test-plugin.php").exists()

        wordpress.restore()  # what the `wordpress` fixture does before each test

        assert admin.get(f"/wp/v2/posts/{post_id}").status_code == 404
        assert [p["title"]["raw"] for p in admin.get("/wp/v2/posts?context=edit").json()] == [
            "Hello world!"
        ]
        plugins = {p["plugin"] for p in admin.get("/wp/v2/plugins").json()}
        assert "pressloop-test-plugin" in plugins
        # Auto-increment counters are restored too: ids are the same in every test.
        again = admin.post("/wp/v2/posts", json={"title": "Same id"})
        assert again.json()["id"] == post_id


def test_the_test_plugin_is_installed_and_can_be_activated(wordpress: LocalSite) -> None:
    with _admin(wordpress) as admin:
        plugins = {p["plugin"]: p for p in admin.get("/wp/v2/plugins").json()}
        assert plugins["pressloop-test-plugin"]["name"] == "Pressloop Test Plugin"
        assert plugins["pressloop-test-plugin"]["status"] == "inactive"
        assert "akismet/akismet" in plugins
        assert "X-Pressloop-Test-Plugin" not in admin.get("/wp/v2/users/me").headers

        activated = admin.post(
            "/wp/v2/plugins/pressloop-test-plugin", json={"status": "active"}
        ).json()
        assert activated["status"] == "active"
        assert admin.get("/wp/v2/users/me").headers["X-Pressloop-Test-Plugin"] == "active"


def test_run_php_runs_code_with_wordpress_loaded(wordpress: LocalSite) -> None:
    assert wordpress.run_php("echo get_option('blogname');") == wordpress.title
    assert wordpress.run_php("<?php echo get_permalink(1);") == f"{wordpress.url}/hello-world/"
    with pytest.raises(LocalSiteError, match="no_such_function"):
        wordpress.run_php("no_such_function();")


def test_missing_packages_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(host, "WORDPRESS_SOURCE", tmp_path / "nowhere")
    monkeypatch.setattr(host, "which", lambda name: None)
    with pytest.raises(ConfigurationError) as caught:
        LocalSite().start()
    message = str(caught.value)
    for package in ("wordpress", "wordpress-theme-twentytwentythree", "php-cli", "mariadb-server"):
        assert package in message
    assert "scripts/ensure-wordpress.sh" in message


def test_a_kept_root_serves_the_same_site_after_a_restart(wordpress_packages: None) -> None:
    # How `make run` keeps a newcomer's site: same root -> same address, passwords and posts.
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="pressloop-kept-", dir=shm) as folder:
        root = Path(folder) / "site"
        with LocalSite(root=root) as first, _admin(first) as admin:
            post_id = admin.post("/wp/v2/posts", json={"title": "Kept"}).json()["id"]
            url, app_password = first.url, first.app_password
        assert root.is_dir() and not first.running

        with LocalSite(root=root) as second, _admin(second) as admin:
            assert (second.url, second.app_password) == (url, app_password)
            assert admin.get(f"/wp/v2/posts/{post_id}").json()["title"]["rendered"] == "Kept"
