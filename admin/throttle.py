"""Login throttling: failed sign-ins counted in moving windows (the `limits` library, the same
storage as the request rate limits), refused while a window is full, whether or not the password
is then right.

Two windows, both LOGIN_LOCKOUT_S long:

* per (user name, client address): LOGIN_MAX_FAILURES failures. Keyed on name *and* address so
  that a guesser cannot lock a colleague out from elsewhere, and a user who mistypes cannot lock
  everyone out.
* per user name, from every address together: LOGIN_ACCOUNT_MAX_FAILURES failures (0: off). A
  guesser with many addresses (a botnet, a cloud of proxies) gets that many guesses at one
  account per window, not LOGIN_MAX_FAILURES per address. The price: while someone keeps an
  account's window full, its owner cannot sign in either, hence the generous default (20).

Unknown names are counted like real ones (the answer never says whether an account exists).
A window empties as its failures age out of it (the lockout expires), and a successful sign-in
empties both of its windows. With REDIS_URL the windows are shared by every worker and host;
when Redis cannot be asked, each process counts alone (web.limits.ResilientStorage):
throttled per worker, never unthrottled and never refused outright.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

from limits import RateLimitItemPerSecond
from limits.storage import Storage
from limits.strategies import MovingWindowRateLimiter

#: The scopes of the two windows (web.limits counts both in this process while Redis is down)
#: and the `limit` label of taskfinder_ratelimited_responses_total when one refuses a sign-in.
PAIR, ACCOUNT = "login_lockout", "login_account"


def account_name(name: str) -> str:
    return (name or "").strip().lower()[:64]


@dataclass(frozen=True)
class Lockout:
    seconds: float   # until the next attempt is taken (0: now)
    window: str      # PAIR or ACCOUNT: which window is full


OPEN = Lockout(0.0, "")


class LoginThrottle:
    def __init__(self, storage: Storage, max_failures: int, window_s: int, account_max_failures: int = 0):
        self.limiter = MovingWindowRateLimiter(storage)
        self.windows = [(PAIR, RateLimitItemPerSecond(max_failures, window_s))]
        if account_max_failures:
            self.windows.append((ACCOUNT, RateLimitItemPerSecond(account_max_failures, window_s)))

    @staticmethod
    def _subject(window: str, name: str, address: str | None) -> str:
        return account_name(name) if window == ACCOUNT else f"{account_name(name)}|{address or '-'}"

    def locked_for(self, name: str, address: str | None) -> Lockout:
        """How long until (name, address) may try again, and which window holds it back."""
        now = time.time()
        for window, rate in self.windows:
            subject = self._subject(window, name, address)
            if not self.limiter.test(rate, subject, window):
                reset = self.limiter.get_window_stats(rate, subject, window).reset_time
                return Lockout(max(1.0, math.ceil(reset - now)), window)
        return OPEN

    def failed(self, name: str, address: str | None) -> None:
        for window, rate in self.windows:
            self.limiter.hit(rate, self._subject(window, name, address), window)

    def succeeded(self, name: str, address: str | None) -> None:
        for window, rate in self.windows:
            self.limiter.clear(rate, self._subject(window, name, address), window)


def build_throttle(settings, storage: Storage) -> LoginThrottle:
    return LoginThrottle(storage, settings.login_max_failures, settings.login_lockout_s,
                         settings.login_account_max_failures)
