"""Who the client is: the TCP peer, or, behind reverse proxies we trust, the address they saw.

TRUSTED_PROXIES (settings.py) lists the addresses or CIDR networks of our own reverse proxies.
`X-Forwarded-For` is a list every proxy appends its peer to, so only its right-hand end was
written by proxies we trust; anything to the left of the first untrusted hop may be invented by
the client. `client_address` therefore walks the header from the right, past our proxies, and
stops at the first address that is not one of them. Used for the roles header (api.roles),
the rate limits (web.limits) and the admin login throttle (admin.throttle): one rule for all.
"""
from __future__ import annotations

import ipaddress
from typing import Iterable

UNKNOWN = "-"


def _address(text: str | None):
    try:
        return ipaddress.ip_address((text or "").strip())
    except ValueError:
        return None


def is_trusted_proxy(remote_addr: str | None, trusted_proxies: Iterable[str]) -> bool:
    """Whether the TCP peer is one of TRUSTED_PROXIES (addresses or CIDR networks)."""
    address = _address(remote_addr)
    return address is not None and any(address in ipaddress.ip_network(network) for network in trusted_proxies)


def client_address(remote_addr: str | None, forwarded_for: str | None, trusted_proxies: Iterable[str]) -> str:
    """The client's address: `remote_addr`, unless that peer is a trusted proxy, in which case the
    first hop of `X-Forwarded-For` (read from the right) that is not a trusted proxy. A hop that
    is not an IP address ends the walk at the last trusted one (it was written by the client, so
    nothing left of it can be believed); a header of trusted proxies only gives its leftmost."""
    trusted = tuple(trusted_proxies)
    if not is_trusted_proxy(remote_addr, trusted):
        return (remote_addr or UNKNOWN).strip() or UNKNOWN
    client = remote_addr.strip()
    for hop in reversed([part.strip() for part in (forwarded_for or "").split(",") if part.strip()]):
        if _address(hop) is None:
            return client
        client = str(_address(hop))
        if not is_trusted_proxy(client, trusted):
            return client
    return client


def known_client_address(remote_addr: str | None, forwarded_for: str | None,
                         trusted_proxies: Iterable[str]) -> str | None:
    """`client_address` when the client is *known*: None when the peer is a trusted proxy and
    any hop of its `X-Forwarded-For` is not a bare IP address (`unknown`, `garbage`,
    `127.0.0.1:80`, `[::1]`). `client_address` then answers the last trusted hop, the proxy's
    own (loopback) address, which is right for keying limits on but says nothing about who the
    client is: what decides on the client being local (/metrics) must not take it for one
    (issue 42 item 5)."""
    trusted = tuple(trusted_proxies)
    if is_trusted_proxy(remote_addr, trusted):
        hops = [part.strip() for part in (forwarded_for or "").split(",")]
        if forwarded_for is not None and any(_address(hop) is None for hop in hops):
            return None
    return client_address(remote_addr, forwarded_for, trusted)
