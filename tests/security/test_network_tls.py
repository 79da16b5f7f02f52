"""HTTPS through the pinned connection: the socket goes to the checked address, while TLS (SNI
and certificate verification) is for the host name. A local server has a certificate for
`shop.test` from a test CA made here with the `openssl` command; it has no IP address in it, so a
handshake verified against 127.0.0.1 would fail."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pressloop.actions.net import NetRules, fetch
from pressloop.errors import ActionError
from tests.security.net_edges import Site, names, page

# The test CA and certificate are made with Debian's openssl (always there with Python's ssl):
# missing, the tests fail saying so, never skip.
assert shutil.which("openssl"), "the TLS tests need the openssl command (apt-get install openssl)"

LEAF_EXTENSIONS = """\
subjectAltName = DNS:shop.test
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
"""


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tls")
    (folder / "leaf.ext").write_text(LEAF_EXTENSIONS)
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for command in (
        ["req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
         "-subj", "/CN=Pressloop test CA", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign"],
        ["req", *key, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=shop.test"],
        ["x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
         "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", "leaf.ext"],
    ):  # fmt: skip
        subprocess.run(["openssl", *command], cwd=folder, check=True, capture_output=True)
    return folder


@pytest.fixture
def shop(certificates: Path) -> Iterator[Site]:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(certificates / "leaf.pem", certificates / "leaf.key")
    site = Site({"/": page(b"secure page")}, tls=tls)
    yield site
    site.stop()


def rules(certificates: Path | None) -> NetRules:
    """Trusting the test CA, or (None) only the usual trusted CAs."""
    return NetRules(
        timeout_s=5,
        allow_private=True,  # the server is on loopback
        resolver=names(shop_test="127.0.0.1", other_test="127.0.0.1"),
        ssl_context=None
        if certificates is None
        else ssl.create_default_context(cafile=str(certificates / "ca.pem")),
    )


async def test_tls_is_for_the_name_while_the_socket_goes_to_the_pinned_address(
    shop: Site, certificates: Path
) -> None:
    url = f"https://shop.test:{shop.port}/"
    fetched = await fetch(url, rules(certificates), max_bytes=1000, cut=True)
    assert fetched.body == b"secure page"
    assert shop.server_names == ["shop.test"]  # SNI
    assert shop.requests == [("/", f"shop.test:{shop.port}")]  # Host


async def test_a_certificate_for_another_name_is_refused(shop: Site, certificates: Path) -> None:
    url = f"https://other.test:{shop.port}/"  # same address, a name the certificate lacks
    with pytest.raises(ActionError, match="certificate verify failed"):
        await fetch(url, rules(certificates), max_bytes=1000, cut=True)
    assert shop.server_names == ["other.test"] and shop.requests == []


async def test_a_certificate_from_an_untrusted_ca_is_refused(shop: Site) -> None:
    url = f"https://shop.test:{shop.port}/"
    with pytest.raises(ActionError, match="certificate verify failed"):
        await fetch(url, rules(None), max_bytes=1000, cut=True)
    assert shop.requests == []
