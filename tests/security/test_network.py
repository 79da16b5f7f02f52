"""The agent's outbound requests (issue 13): the owner's allowlist, the address check, and
connections pinned to the address that was checked, against real servers on 127.0.0.1.

A public address (93.184.216.34) stands for a site on the internet: `Dial` routes it to a local
server, so a test can tell "connected to the checked public address" from "connected to
loopback", which a recording listener on 127.0.0.1 sees.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from ipaddress import ip_address
from typing import Any

import pytest

from pressloop.actions.executor import Executor
from pressloop.actions.net import NetRules, fetch, host_allowed, parse_allowlist, refusal
from pressloop.actions.outbound import FetchOptions
from pressloop.actions.registry import ActionServices, Registry
from pressloop.actions.web import WEB_ACTIONS
from pressloop.contracts import ActionCall, ActionContext, Policy, StepStatus, Trigger
from pressloop.errors import ActionError
from tests.security.net_edges import Dial, Names, Route, Site, names, page, redirect

PUBLIC = "93.184.216.34"


@pytest.fixture
def serve() -> Iterator[Callable[[dict[str, Route]], Site]]:
    sites: list[Site] = []

    def start(routes: dict[str, Route]) -> Site:
        sites.append(Site(routes))
        return sites[-1]

    yield start
    for site in sites:
        site.stop()


@pytest.fixture
def listener(serve: Callable[[dict[str, Route]], Site]) -> Site:
    """Loopback, where an injected page must never lead: it records every connection."""
    return serve({"/": page(b"internal"), "/secret": page(b"internal secret")})


async def get(url: str, **rules: Any) -> bytes:
    return (await fetch(url, NetRules(timeout_s=5, **rules), max_bytes=10_000, cut=True)).body


# -- host_allowed ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "allowlist", "allowed"),
    [
        ("https://example.com/page", ["example.com"], True),
        ("http://EXAMPLE.com.:8080/x", ["Example.COM"], True),  # case, trailing dot, port
        ("https://www.example.com/", ["example.com"], False),  # a host is only that host
        ("https://wordpress.org/plugins/", [".wordpress.org"], True),  # a suffix: the domain
        ("https://downloads.wordpress.org/x.zip", [".wordpress.org"], True),  # and below it
        ("https://evilwordpress.org/", [".wordpress.org"], False),
        ("https://wordpress.org.evil.test/", [".wordpress.org"], False),
        ("http://example.com@evil.test/", ["example.com"], False),  # userinfo, not the host
        ("http://evil.test#@example.com/", ["example.com"], False),
        ("http://evil.test/?next=example.com", ["example.com"], False),
        ("https://bücher.example/", ["xn--bcher-kva.example"], True),  # IDN, as sent
        ("https://xn--bcher-kva.example/", ["bücher.example"], True),
        ("http://[2001:db8::1]/", ["2001:db8::1"], True),
        ("http://203.0.113.5/", ["203.0.113.5"], True),
        ("ftp://example.com/", ["example.com"], False),  # not a web request
        ("file:///etc/passwd", ["example.com", ""], False),
        ("not a url", ["example.com"], False),
        ("https://example.com/", [], False),  # nothing configured: nothing allowed
    ],
)
def test_host_allowed(url: str, allowlist: list[str], allowed: bool) -> None:
    assert host_allowed(url, allowlist) is allowed


def test_the_setting_is_a_comma_separated_list() -> None:
    assert parse_allowlist(" example.com, .WordPress.org ,,") == ("example.com", ".wordpress.org")
    assert parse_allowlist("") == ()


# -- the address check -------------------------------------------------------------------------

REFUSED = [
    "0.0.0.0", "0.1.2.3", "10.1.2.3", "100.64.0.1", "100.127.255.254", "127.0.0.1",
    "127.255.255.254", "169.254.169.254", "172.16.0.1", "172.31.255.255", "192.0.0.8",
    "192.0.2.1", "192.88.99.1", "192.168.1.1", "198.18.0.1", "198.19.255.255", "198.51.100.7",
    "203.0.113.9", "224.0.0.251", "239.255.255.250", "240.0.0.1", "255.255.255.255",
    "::", "::1", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0", "fec0::1", "ff02::1",
    "ff0e::1", "100::1", "2001:2::1", "2001:db8::1", "3fff::1", "5f00::1", "4000::1",
    "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::ffff:100.64.0.1",  # mapped
    "::127.0.0.1", "::a00:1", "::c0a8:101",  # IPv4-compatible (::/96)
    "64:ff9b::127.0.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b::c0a8:101",  # NAT64, by the IPv4
    "64:ff9b:1::808:808", "64:ff9b:1::7f00:1",  # local-use NAT64: refused whatever it carries
    "2002:7f00:1::1", "2002:a9fe:a9fe::1", "2002:c0a8:101::1",  # 6to4, by the IPv4
    "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::1",  # Teredo
]  # fmt: skip
PUBLIC_ADDRESSES = [
    "93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001:800::200e",
    "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",  # carrying a public IPv4
]  # fmt: skip


@pytest.mark.parametrize("address", REFUSED)
def test_special_purpose_addresses_are_refused(address: str) -> None:
    assert refusal(ip_address(address)) is not None


@pytest.mark.parametrize("address", PUBLIC_ADDRESSES)
def test_public_unicast_addresses_pass(address: str) -> None:
    assert refusal(ip_address(address)) is None


@pytest.mark.parametrize("address", REFUSED)
async def test_a_name_with_a_special_address_is_refused_before_connecting(address: str) -> None:
    dial = Dial()
    with pytest.raises(ActionError, match="not a public address"):
        await get("http://site.test/", resolver=names(site_test=address), dial=dial)
    assert dial.dialed == []


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "[::ffff:127.0.0.1]", "localhost", "2130706433", "0x7f.1"],
)
async def test_loopback_in_any_spelling_is_refused(listener: Site, host: str) -> None:
    """With the system's resolver: `2130706433` and `0x7f.1` are 127.0.0.1 to getaddrinfo."""
    with pytest.raises(ActionError, match="not a public address"):
        await get(f"http://{host}:{listener.port}/")
    assert listener.connections == 0


async def test_allow_private_keeps_its_meaning(listener: Site) -> None:
    assert await get(f"http://127.0.0.1:{listener.port}/", allow_private=True) == b"internal"


# -- pinning: one resolution, and the connection goes to the checked address -------------------


async def test_a_rebinding_name_never_leads_to_loopback(serve: Any, listener: Site) -> None:
    """The name answers a public address first and 127.0.0.1 after: the check and the connection
    share the one answer, so the page comes from the public site and loopback sees nothing."""
    public = serve({"/": page(b"public page")})
    resolver = Names({"rebind.test": [[PUBLIC], ["127.0.0.1"]]})
    dial = Dial({PUBLIC: public.port})
    body = await get(f"http://rebind.test:{listener.port}/", resolver=resolver, dial=dial)
    assert body == b"public page"
    assert resolver.calls == ["rebind.test"]  # resolved once
    assert dial.dialed == [(PUBLIC, listener.port)]
    assert listener.connections == 0


async def test_a_rebinding_name_is_checked_again_on_each_connection(
    serve: Any, listener: Site
) -> None:
    """Each hop opens a new connection (the server closes it): its answer is checked too."""
    public = serve({"/": redirect("/next")})
    resolver = Names({"rebind.test": [[PUBLIC], ["127.0.0.1"]]})
    dial = Dial({PUBLIC: public.port})
    with pytest.raises(ActionError, match=r"resolves to 127\.0\.0\.1 \(loopback\)"):
        await get(f"http://rebind.test:{listener.port}/", resolver=resolver, dial=dial)
    assert resolver.calls == ["rebind.test", "rebind.test"]
    assert dial.dialed == [(PUBLIC, listener.port)]
    assert listener.connections == 0


async def test_one_special_address_among_public_ones_refuses_the_name(listener: Site) -> None:
    dial = Dial()
    resolver = Names({"mixed.test": [[PUBLIC, "127.0.0.1"]]})
    with pytest.raises(ActionError, match="not a public address"):
        await get(f"http://mixed.test:{listener.port}/", resolver=resolver, dial=dial)
    assert dial.dialed == [] and listener.connections == 0


@pytest.mark.parametrize("allowlist", [(), ("news.example", "127.0.0.1")])
async def test_a_redirect_to_loopback_is_refused_at_the_hop(
    serve: Any, listener: Site, allowlist: tuple[str, ...]
) -> None:
    """Also when the owner allowed both hosts: the allowlist never opens private addresses."""
    public = serve({"/": redirect(f"http://127.0.0.1:{listener.port}/secret")})
    dial = Dial({PUBLIC: public.port})
    with pytest.raises(ActionError, match=r"127\.0\.0\.1 \(loopback\), not a public address"):
        await get(
            "http://news.example/", resolver=names(news_example=PUBLIC), dial=dial,
            allowlist=allowlist,
        )  # fmt: skip
    assert public.requests == [("/", "news.example")]
    assert listener.connections == 0


async def test_a_request_to_an_allowed_host_stays_on_allowed_hosts(serve: Any) -> None:
    public = serve({"/": redirect("http://collector.example/?emails=a@b.example")})
    dial = Dial({PUBLIC: public.port})
    resolver = names(news_example=PUBLIC, collector_example="198.51.99.1")
    with pytest.raises(ActionError, match="redirected to collector.example, which is not on it"):
        await get("http://news.example/", resolver=resolver, dial=dial, allowlist=("news.example",))
    assert resolver.calls == ["news.example"]  # the next host was not even looked up
    assert dial.dialed == [(PUBLIC, 80)]


async def test_redirects_are_capped(serve: Any) -> None:
    loop = serve({"/loop": redirect("/loop")})
    with pytest.raises(ActionError, match="redirected more than 5 times"):
        await get(
            f"http://loop.test:{loop.port}/loop", resolver=names(loop_test="127.0.0.1"),
            allow_private=True,
        )  # fmt: skip
    assert len(loop.requests) == 6


async def test_a_pinned_fetch_works_end_to_end_with_the_original_host(serve: Any) -> None:
    """No fake dialer: a name only the injected resolver knows is fetched over real TCP, so the
    connection can only have gone to the address the resolver gave; the Host is the name."""
    blog = serve({"/": redirect("/post"), "/post": page(b"a post")})
    resolver = names(blog_test="127.0.0.1")
    body = await get(f"http://blog.test:{blog.port}/", resolver=resolver, allow_private=True)
    assert body == b"a post"
    assert blog.requests == [("/", f"blog.test:{blog.port}"), ("/post", f"blog.test:{blog.port}")]


async def test_the_next_checked_address_is_tried_when_one_does_not_answer(serve: Any) -> None:
    blog = serve({"/": page(b"v4 only")})
    resolver = Names({"dual.test": [["::1", "127.0.0.1"]]})  # nothing listens on [::1]:port
    dial = Dial()
    body = await get(
        f"http://dual.test:{blog.port}/", resolver=resolver, dial=dial, allow_private=True
    )
    assert body == b"v4 only"
    assert dial.dialed == [("::1", blog.port), ("127.0.0.1", blog.port)]


async def test_a_resolver_that_never_answers_times_out() -> None:
    async def stuck(_host: str, _port: int) -> list[Any]:
        await asyncio.Event().wait()
        return []

    dial = Dial()
    with pytest.raises(ActionError, match="resolving slow.test took over"):
        await fetch(
            "http://slow.test/",
            NetRules(timeout_s=0.2, resolver=stuck, dial=dial),
            max_bytes=10,
            cut=True,
        )
    assert dial.dialed == []


# -- web_fetch reports whether the host is allowed ----------------------------------------------


@pytest.mark.parametrize(("allowlist", "allowed"), [((".blog.test",), True), ((), False)])
async def test_web_fetch_says_whether_the_host_is_allowed(
    serve: Any, allowlist: tuple[str, ...], allowed: bool
) -> None:
    blog = serve({"/": page(b"<p>Hi</p>", "text/html")})
    web = FetchOptions(
        allow_private=True, allowlist=allowlist, resolver=names(www_blog_test="127.0.0.1")
    )
    executor = Executor(Registry(WEB_ACTIONS), ActionServices(web=web))
    context = ActionContext(
        run_id="r", thread_id="t", trigger=Trigger.CHAT, step_index=0, policy=Policy()
    )
    call = ActionCall(
        id="c", name="web_fetch", params={"url": f"http://www.blog.test:{blog.port}/"}
    )
    outcome = await executor.run(call, context)
    assert outcome.status is StepStatus.SUCCEEDED, outcome.content
    assert outcome.data["host_allowed"] is allowed and outcome.data["text"] == "Hi"
