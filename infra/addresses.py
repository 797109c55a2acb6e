"""Which addresses are one client, and which are one network (issue 42 item 4): the one place
that groups client addresses, for everything that keys on one.

    what                   IPv4                 IPv6                  used by
    client_key(address)    the address (/32)    its /64               rate limits (web.limits), event caps
                                                                      (analytics.budget), login windows
                                                                      (admin.throttle), sessions per
                                                                      address (analytics.sources)
    network_of(address)    its /24              its /48               crowd counting (network pseudonyms,
                                                                      analytics.sources), the per-network
                                                                      event cap (analytics.budget)

An IPv6 /64 is one host's, not one address: a subnet every end site is given (RFC 4291 section
2.5.1, RFC 6177) in which a host picks any interface identifier it likes (SLAAC privacy addresses,
RFC 8981). Counted address by address, one laptop had 2^64 budgets: 40 addresses of one /64
filled the global event cap in about 40 s (issue 42 item 4). So a client is its /64; an IPv4
client is its address (NAT puts many people behind one, so nothing coarser is fair to key a
person's limits on). An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, what a dual-stack socket
reports) is the IPv4 address it maps. The coarse network is what one organisation or provider
customer holds: an IPv4 /24, an IPv6 /48 (the usual end-site assignment, 65,536 /64s).

Anything that is not an IP address (the "-" of web.clients for an unknown peer, a verified
person's "person:<sub>" key) is its own key, unchanged; `network_of` says None for it.
"""
from __future__ import annotations

import ipaddress

IPV4_CLIENT_PREFIX, IPV6_CLIENT_PREFIX = 32, 64
IPV4_NETWORK_PREFIX, IPV6_NETWORK_PREFIX = 24, 48


def parse(address: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address `address` names (an IPv4-mapped IPv6 address as its IPv4), or None."""
    try:
        ip = ipaddress.ip_address((address or "").strip())
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _prefix(ip, v4: int, v6: int) -> str:
    prefix = v4 if ip.version == 4 else v6
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))


def client_key(address: str | None) -> str:
    """The key one client counts under: an IPv4 address itself, an IPv6 address's /64
    (`2001:db8:1:2::/64`); anything that is not an IP address unchanged ("-" for none)."""
    ip = parse(address)
    if ip is None:
        return (address or "-").strip() or "-"
    return str(ip) if ip.version == 4 else _prefix(ip, IPV4_CLIENT_PREFIX, IPV6_CLIENT_PREFIX)


def network_of(address: str | None) -> str | None:
    """The coarse network of an address: its /24 (IPv4) or /48 (IPv6); None when it is not one."""
    ip = parse(address)
    return None if ip is None else _prefix(ip, IPV4_NETWORK_PREFIX, IPV6_NETWORK_PREFIX)
