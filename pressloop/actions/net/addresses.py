"""Which addresses the agent's outbound requests may reach: public unicast ones only.

`refusal` names why an address is refused, or returns None for a public unicast address. It does
not trust `ipaddress.is_global` alone (Python 3.11 calls multicast, the IPv4-compatible `::/96`
forms and NAT64 `64:ff9b::/96` global): special-purpose ranges are listed here, and IPv6 forms
that carry an IPv4 address (mapped, compatible, NAT64, 6to4) are judged by that address.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

IPAddress = IPv4Address | IPv6Address


def _v4(*ranges: tuple[str, str]) -> tuple[tuple[IPv4Network, str], ...]:
    return tuple((IPv4Network(network), why) for network, why in ranges)


def _v6(*ranges: tuple[str, str]) -> tuple[tuple[IPv6Network, str], ...]:
    return tuple((IPv6Network(network), why) for network, why in ranges)


# IANA's IPv4 special-purpose registry, the parts not reachable on the public internet.
_V4_REFUSED = _v4(
    ("0.0.0.0/8", "'this network'"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "carrier-grade NAT"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.0.2.0/24", "documentation"),
    ("192.88.99.0/24", "6to4 relay anycast"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),  # and the broadcast address 255.255.255.255
)

# IPv6 forms that carry an IPv4 address in their low 32 bits, judged by it.
_V6_EMBEDDING = _v6(
    ("::ffff:0:0/96", "IPv4-mapped"),
    ("::/96", "IPv4-compatible"),
    ("64:ff9b::/96", "NAT64"),
)

# Checked in order: the first match names the reason.
_V6_REFUSED = _v6(
    ("64:ff9b:1::/48", "local-use NAT64"),
    ("100::/64", "discard-only"),
    ("2001::/32", "Teredo"),
    ("2001:2::/48", "benchmarking"),
    ("2001:db8::/32", "documentation"),
    ("2001::/23", "IETF protocol assignments"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "SRv6"),
    ("fc00::/7", "unique local (private)"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
)
_V6_GLOBAL_UNICAST = IPv6Network("2000::/3")


def refusal(address: IPAddress) -> str | None:
    """Why `address` must not be reached (e.g. "loopback"), or None if it is public unicast."""
    if isinstance(address, IPv4Address):
        return _v4_refusal(address)
    return _v6_refusal(IPv6Address(int(address)))  # without a scope id (fe80::1%eth0)


def _v4_refusal(address: IPv4Address) -> str | None:
    for network, why in _V4_REFUSED:
        if address in network:
            return why
    return None if address.is_global else "not global"


def _v6_refusal(address: IPv6Address) -> str | None:
    if address == IPv6Address("::"):
        return "unspecified"
    if address == IPv6Address("::1"):
        return "loopback"
    for network, form in _V6_EMBEDDING:
        if address in network:
            return _embedded(form, IPv4Address(int(address) & 0xFFFFFFFF))
    if address.sixtofour is not None:
        return _embedded("6to4", address.sixtofour)
    for network, why in _V6_REFUSED:
        if address in network:
            return why
    if address not in _V6_GLOBAL_UNICAST:
        return "reserved"
    return None if address.is_global else "not global"


def _embedded(form: str, inner: IPv4Address) -> str | None:
    why = _v4_refusal(inner)
    return None if why is None else f"{form} form of {inner}, {why}"
