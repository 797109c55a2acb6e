"""One address, many sessions: a cap on how many distinct sessions one client address may vote
with, held in memory only (the address is never stored; issue 16 item 3).

Session ids are the widget's own (random per tab), so one bot can make as many as it likes, and
the distinct-session threshold of learning (LEARNING_MIN_SESSIONS) alone would not stop it. The
events endpoint asks `admit(address, session)`: an address may bring at most
LEARNING_SESSIONS_PER_ADDRESS distinct sessions per window (an hour); the events of any further
session are stored without their session id, which binds them to no search
(analytics.formulas.bound_to_search): neither a measure nor learning counts them.

The table lives in this process's memory (per gunicorn worker: a bot reaching N workers gets N
times the cap; documented), keyed by the address as the rate limiter sees it
(web.limits.request_client) and grouped as every limit groups it (infra.addresses.client_key: an
IPv6 /64 is one client, issue 42 item 4), forgotten when the window turns; at most MAX_ADDRESSES addresses
are tracked (past that, the window is cleared early: the cap errs towards counting).

**Networks** (issue 16 item 3: "one address must not move a ranking"): the cap above is per
process and still lets one address vote with up to the cap's sessions. So each event is also
stored with `network_pseudonym(address)`: HMAC-SHA256 under a server key of the address's /24
(IPv4) or /48 (IPv6), cut to NETWORK_PSEUDONYM_BITS (16) bits, 4 hex characters. Coarse (a block
of neighbouring addresses is one network), keyed (not comparable across deployments), lossy
(even with the key, each value stands for ~256 of the internet's 2^24 IPv4 /24s), and stable:
the same network is the same value on every day, so an address coming back on later days is
still one network (until 2026-11-25 the value also hashed the UTC day, and one address on three
days made a pair count: `test_one_address_coming_back_on_later_days_stays_one_network`). Two
distinct networks share a value with probability 2^-16: an undercount, never an overcount. It
lives in the raw event log only, which the retention purge deletes; learned_evidence keeps a
sketch of the distinct networks, and a pair counts only with LEARNING_MIN_NETWORKS of them as
well as LEARNING_MIN_SESSIONS sessions (search.learned.eligible).

**People** (an office's staff behind one address are one network, so by the rule above they
never learn): where the host verifies who searches (a role token's `sub`, or a trusted proxy's
TRUSTED_USER_HEADER; api.roles), the *search* record keeps `person_pseudonym(subject)`: the first
PERSON_PSEUDONYM_BITS (8) bits of HMAC-SHA256 under the same server key of "person\0<subject>",
2 hex characters. A click binds only to its own session's search (analytics.formulas), so the
person a vote counts for was verified when the search was made, never claimed by the click.
Lossy by design: 256 values, so in an organisation of more than 256 people every value stands
for several (two people sharing one: an undercount, never an overcount; two of three clicking
people share one with probability ~1/85, all three ~1/65,000). A pair then counts with
LEARNING_MIN_PEOPLE distinct people as an alternative to LEARNING_MIN_NETWORKS networks; one
person, with or without their token, is one person and one network. The per-address session
cap above counts the sessions of an events request that verifies a person under that person
instead (`gate_key`, in memory only, like the address): each of an office's staff brings their
own LEARNING_SESSIONS_PER_ADDRESS sessions.
"""
from __future__ import annotations

import hashlib
import hmac
import threading
import time
from typing import Callable

from infra.addresses import client_key, network_of

MAX_ADDRESSES = 100_000
WINDOW_S = 3600.0


class AddressSessions:
    def __init__(self, limit: int, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic):
        self.limit, self.window_s, self.clock = limit, window_s, clock
        self._window_start = clock()
        self._sessions: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def admit(self, address: str | None, session_id: str | None) -> bool:
        """Whether `session_id`'s events from `address` may bind to their searches."""
        if not address or not session_id:
            return True
        address = client_key(address)
        with self._lock:
            now = self.clock()
            if now - self._window_start >= self.window_s or len(self._sessions) >= MAX_ADDRESSES:
                self._sessions.clear()
                self._window_start = now
            seen = self._sessions.setdefault(address, set())
            if session_id in seen:
                return True
            if len(seen) >= self.limit:
                return False
            seen.add(session_id)
            return True


NETWORK_PSEUDONYM_BITS = 16


def network_pseudonym(address: str | None, key: bytes) -> str | None:
    """The first NETWORK_PSEUDONYM_BITS bits of HMAC-SHA256(key, "<network>") in hex (module
    docstring; the same on every day); None for something that is not an address (its events
    then count per session, as before)."""
    network = network_of(address)
    if network is None:
        return None
    return hmac.new(key, network.encode("ascii"), hashlib.sha256).hexdigest()[:NETWORK_PSEUDONYM_BITS // 4]


PERSON_PSEUDONYM_BITS = 8


def person_pseudonym(subject: str | None, key: bytes) -> str | None:
    """The first PERSON_PSEUDONYM_BITS bits of HMAC-SHA256(key, "person\0<subject>") in hex
    (module docstring), or None without a verified subject."""
    if not subject:
        return None
    digest = hmac.new(key, b"person\0" + subject.encode("utf-8"), hashlib.sha256).hexdigest()
    return digest[:PERSON_PSEUDONYM_BITS // 4]


def gate_key(address: str | None, subject: str | None) -> str | None:
    """What the per-address session cap (AddressSessions) counts an events request's session
    under: the verified person when the request verifies one (each of an office's staff has
    their own cap), else the address. Held in memory only, never stored."""
    return f"person:{subject}" if subject else address
