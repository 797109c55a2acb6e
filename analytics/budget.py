"""Flood caps of POST /api/events (issue 17 item 6; issue 33 items 3 and 4).

Four caps, each a `limits` moving window of WINDOW_S (any 60 s span), checked narrowest first:

    cap        counted per                     setting                               default
    session    the batch's session id          ANALYTICS_SESSION_EVENTS_PER_MINUTE      120
    address    the client, every post          ANALYTICS_ADDRESS_EVENTS_PER_MINUTE      600
    network    the client's network            ANALYTICS_NETWORK_EVENTS_PER_MINUTE    2,000
    everyone   one count                       ANALYTICS_EVENTS_PER_MINUTE           20,000

The client and its network are infra.addresses': an IPv4 address or an IPv6 /64
(`client_key`), and an IPv4 /24 or an IPv6 /48 (`network_of`). Counted address by address, one
host's /64 held 2^64 address budgets: 40 addresses of one /64 filled the cap of everyone in about
40 s and the victim's events answered 429 on 30 of 38 posts (issue 42 item 4).

A request over any cap is refused whole (429 with Retry-After: when the oldest counted event
leaves that cap's window) and nothing of it is stored.

Shared by every worker and host: with REDIS_URL the windows live in Redis (the `limits`
storage of web.limits, one Lua script per cap), so a cap is a cap of the deployment, not of
each process. Counted per process, the audit saw one session store 100 events a minute on one
process, 250 on 2 workers and 400 on 4 (issue 33 item 4). Without REDIS_URL each process counts
alone (the embedded default: one process). While Redis cannot be asked, each process counts
alone too (web.limits.LOCAL_SCOPES): these caps bound rows written to the database, so they
never fail open as the public rate limits do.

Fair per client, and why the global cap is only a safety valve. What one client stores is
bounded by its own caps: its session's and its address's (the client as the rate limits see
it: web.clients.client_address, grouped by infra.addresses.client_key). The address cap counts every event of the address,
with or without a session id: a session id is made up by the caller, so a fresh one per post
would otherwise buy a fresh budget each time, and a session-less post had no cap of its own at
all (19,900 events a minute from one address, issue 33 item 4). The cap of everyone bounds the
table's growth (ANALYTICS_EVENTS_PER_MINUTE x 1,440 rows a day at most, whoever sends them),
but when it is reached it refuses everyone, the flooders' victims included: 4 flooding
addresses made 38 of a victim's 56 posts answer 429 (issue 33 item 3). So it is sized to be out
of reach of a handful of clients: it takes ceil(everyone / address) addresses, each flooding at
its own cap, to reach it (34 with the defaults; `addresses_to_exhaust`, warned about at start
when under MIN_ADDRESSES_TO_EXHAUST). A few flooding addresses are each stopped at their own
cap and leave the rest for everyone else. A fair *share* of the global cap per active client
was the alternative; it needs a shared count of the clients active this minute on every post,
and a botnet of many addresses exhausts it just the same, so fixed per-client caps give the
same protection with numbers an operator can read and size.

The network cap (issue 42 item 4) is that fixed share one level up: an IPv6 /48 holds 65,536
/64s, each a client with its own address cap, so one end site (or one cloud customer) could
still reach the cap of everyone alone. Each network gets ANALYTICS_NETWORK_EVENTS_PER_MINUTE of
it, so it takes ceil(everyone / network) networks, each flooding at its own cap, to refuse
everyone (10 with the defaults; `networks_to_exhaust`, warned about at start like addresses).
An office behind one IPv4 /24 shares that network's cap: sized at a few addresses' worth, it is
far above what an office's widget traffic sends (one search's impression and a click or two).

Narrowest first: each cap is taken atomically in its own key (Redis evaluates each script
alone), and a request refused by one cap is never counted in a wider one, so a client over its
own cap uses nothing of the cap of everyone. A request admitted by its narrow caps and refused
by a wider one stays counted in the narrow ones (`limits` cannot give entries back); that costs
only the client whose address, or everyone, is over, and errs on the side of storing less.

Impressions are stored compactly: one per search id per window in each process (the widget
sends one when it shows the results; a repeat says nothing new), each with its task ids once,
in order. That is a deduplication, not a bound, so it stays in process memory.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from limits import RateLimitItemPerSecond
from limits.storage import Storage
from limits.strategies import MovingWindowRateLimiter

from analytics.records import EventRecord
from infra.addresses import client_key, network_of

log = logging.getLogger(__name__)

WINDOW_S = 60
#: The `limits` scopes of the caps (web.limits.LOCAL_SCOPES counts them per process while Redis is down).
SESSION_SCOPE, ADDRESS_SCOPE, EVERYONE_SCOPE = "events_session", "events_address", "events_everyone"
NETWORK_SCOPE = "events_network"
#: Below this many addresses (or networks) able to reach the cap of everyone, a start logs a warning.
MIN_ADDRESSES_TO_EXHAUST = 10


@dataclass(frozen=True)
class Cap:
    name: str         # what the 429 names: "session", "address", "network", "everyone"
    scope: str        # the `limits` scope, the last identifier of its keys
    item: RateLimitItemPerSecond

    def identifiers(self, subject: str) -> tuple[str, str]:
        return subject, self.scope


@dataclass(frozen=True)
class Admission:
    """What `EventBudget.admit` decided: the events to store, or the cap that refused the
    request (`refused_by`: "session", "address", "network" or "everyone") and the seconds to wait."""
    events: list[EventRecord] = field(default_factory=list)
    refused_by: str | None = None
    retry_after_s: int | None = None


class EventBudget:
    """The caps of POST /api/events (module docstring) over a `limits` storage: Redis shared
    by every worker (web.limits.build_storage), or a MemoryStorage of this process."""

    def __init__(self, storage: Storage, per_session: int, per_address: int, total: int,
                 window_s: int = WINDOW_S, clock: Callable[[], float] = time.monotonic,
                 per_network: int | None = None):
        self.limiter = MovingWindowRateLimiter(storage)
        self.session = Cap("session", SESSION_SCOPE, RateLimitItemPerSecond(per_session, window_s))
        self.address = Cap("address", ADDRESS_SCOPE, RateLimitItemPerSecond(per_address, window_s))
        self.network = (Cap("network", NETWORK_SCOPE, RateLimitItemPerSecond(per_network, window_s))
                        if per_network else None)
        self.everyone = Cap("everyone", EVERYONE_SCOPE, RateLimitItemPerSecond(total, window_s))
        self.impressions = RecentImpressions(window_s, clock)

    @property
    def addresses_to_exhaust(self) -> int:
        """How many addresses, each flooding at its own cap, it takes to reach the cap of everyone."""
        return math.ceil(self.everyone.item.amount / self.address.item.amount)

    @property
    def networks_to_exhaust(self) -> int | None:
        """How many networks, each flooding at its own cap, it takes to reach the cap of everyone."""
        return math.ceil(self.everyone.item.amount / self.network.item.amount) if self.network else None

    def admit(self, address: str, session_id: str | None, events: Sequence[EventRecord]) -> Admission:
        """Take `events` from the caps of the session (if any), the client (`address` grouped by
        infra.addresses.client_key: an IPv6 /64 is one client), its network (an IPv4 /24, an IPv6
        /48) and everyone, in that order; the events to store (repeated impressions left out),
        or the refusing cap."""
        n = len(events)
        if n:
            caps = [(self.session, session_id)] if session_id is not None else []
            caps.append((self.address, client_key(address)))
            network = network_of(address)
            if self.network is not None and network is not None:
                caps.append((self.network, network))
            for cap, subject in [*caps, (self.everyone, "all")]:
                if not self.limiter.hit(cap.item, *cap.identifiers(subject), cost=n):
                    return Admission(refused_by=cap.name, retry_after_s=self.retry_after(cap, subject))
        return Admission(events=self.impressions.compact(events))

    def retry_after(self, cap: Cap, subject: str) -> int:
        """Whole seconds until the oldest event counted in the cap's window leaves it (at least 1)."""
        reset_time = self.limiter.get_window_stats(cap.item, *cap.identifiers(subject)).reset_time
        return max(1, math.ceil(reset_time - time.time()))


class RecentImpressions:
    """The search ids whose impression this process stored in the current fixed window."""

    def __init__(self, window_s: float, clock: Callable[[], float]):
        self.window_s = window_s
        self.clock = clock
        self._lock = threading.Lock()
        self._window: int | None = None
        self._seen: set[str] = set()

    def compact(self, events: Sequence[EventRecord]) -> list[EventRecord]:
        with self._lock:
            window = int(self.clock() // self.window_s)
            if window != self._window:
                self._window = window
                self._seen.clear()
            return compact_impressions(events, self._seen)


def compact_impressions(events: Sequence[EventRecord], seen: set[str]) -> list[EventRecord]:
    """`events` without impressions of a search id already in `seen` (which gains the new ones),
    and each impression's task ids without repeats, in order."""
    kept = []
    for event in events:
        if event.type == "impression":
            if event.search_id in seen:
                continue
            seen.add(event.search_id)
            if event.task_ids is not None:
                event = replace(event, task_ids=tuple(dict.fromkeys(event.task_ids)))
        kept.append(event)
    return kept


def build_event_budget(settings, storage: Storage) -> EventBudget:
    """The app's EventBudget over `storage`: Redis with REDIS_URL (app.py builds it with
    web.limits.build_storage, its own circuit breaker shown in /metrics as breaker="redis_events"),
    else this process's memory."""
    budget = EventBudget(storage, settings.analytics_session_events_per_minute,
                         settings.analytics_address_events_per_minute, settings.analytics_events_per_minute,
                         per_network=settings.analytics_network_events_per_minute)
    networks = budget.networks_to_exhaust
    if networks is not None and networks < MIN_ADDRESSES_TO_EXHAUST:
        log.warning("ANALYTICS_EVENTS_PER_MINUTE=%d is reached by %d networks flooding at "
                    "ANALYTICS_NETWORK_EVENTS_PER_MINUTE=%d; then every client's events answer 429 "
                    "(size it to at least %d networks' worth)", budget.everyone.item.amount, networks,
                    budget.network.item.amount, MIN_ADDRESSES_TO_EXHAUST)
    if budget.addresses_to_exhaust < MIN_ADDRESSES_TO_EXHAUST:
        log.warning("ANALYTICS_EVENTS_PER_MINUTE=%d is reached by %d addresses flooding at "
                    "ANALYTICS_ADDRESS_EVENTS_PER_MINUTE=%d; then every client's events answer 429 "
                    "(size it to at least %d addresses' worth)", budget.everyone.item.amount,
                    budget.addresses_to_exhaust, budget.address.item.amount, MIN_ADDRESSES_TO_EXHAUST)
    return budget
