"""Login throttling: failed sign-ins counted in moving windows (the `limits` library, the same
storage as the request rate limits), refused while a window is full, whether or not the password
is then right.

Three windows, all LOGIN_LOCKOUT_S long:

* per (user name, client): LOGIN_MAX_FAILURES failures. Keyed on name *and* client so
  that a guesser cannot lock a colleague out from elsewhere, and a user who mistypes cannot lock
  everyone out. Every attempt counts here. The client is infra.addresses.client_key of the
  address: an IPv6 /64 is one client (one host picks any of its 2^64 addresses: issue 42 item 4).
* per user name, from every address together: LOGIN_ACCOUNT_MAX_FAILURES failures (0: off), then
  an exponential back-off (issue 42 item 6). A guesser with many addresses (a botnet, a cloud of
  proxies) gets that many free guesses at one account per window, not LOGIN_MAX_FAILURES per
  address; past them, each further failure doubles the wait before the account's next attempt
  (1 s, 2 s, 4 s ...) up to LOGIN_ACCOUNT_BACKOFF_MAX_S (60 s). Anybody can fill this window, so
  it only counts and slows attempts from browsers that the account has not signed in from, and
  it never holds the right password for longer than the cap after the last wrong one: until
  issue 42 a full window refused every new browser, the owner's right password included, for
  the rest of LOGIN_LOCKOUT_S (20 guesses every 15 minutes kept the owner out of every new
  browser). OWASP's Authentication Cheat Sheet: lockouts are a denial of service anyone can
  aim; an exponential delay slows guessing without locking the owner out. The cost: after the
  free guesses, a botnet gets one guess per cap (15 more in a 15-minute window at 60 s), and a
  guesser who retries the moment each wait ends races the owner for it (the device cookie
  below is the way past that race).
* per known device: LOGIN_MAX_FAILURES failures. OWASP's "device cookies" (Slow Down Online
  Guessing Attacks with Device Cookies, issue 33 item 12): a successful sign-in leaves a device
  cookie (DeviceCookies: signed with the app's secret key, naming the account, expiring). An
  attempt presenting a valid one for the name it signs in as is exempt from the account window
  above, so a botnet keeping that window full does not lock the owner out, and is counted in
  this window of its own instead, so a stolen cookie still gets only a few guesses per window.

Unknown names are counted like real ones (the answer never says whether an account exists).
A window empties as its failures age out of it (the lockout expires). A successful sign-in
empties its (name, address) window and, from a known device, that device's window, from any
other browser the account window too; a sign-in from a known device leaves the account window
as the guessers left it. With REDIS_URL the windows are shared by every worker and host;
when Redis cannot be asked, each process counts alone (web.limits.ResilientStorage):
throttled per worker, never unthrottled and never refused outright.
"""
from __future__ import annotations

import math
import re
import secrets
import time
from dataclasses import dataclass
from typing import Callable

from itsdangerous import BadData, URLSafeTimedSerializer
from limits import RateLimitItemPerSecond
from limits.storage import Storage
from limits.strategies import MovingWindowRateLimiter

from infra.addresses import client_key

#: The windows, as named by Lockout.window and by the `limit` label of
#: taskfinder_ratelimited_responses_total when one refuses a sign-in.
PAIR, ACCOUNT, DEVICE = "login_lockout", "login_account", "login_device"
#: The storage scope of each window. web.limits counts only LOCAL_SCOPES in this process while
#: Redis is down (anything else fails open), so the device window is kept under the pair's scope:
#: its subjects ("name|device:<hex>") can never equal a pair's ("name|address"), since names hold
#: no "|" (admin.accounts.NAME_PATTERN) and a device id is hex, never an address.
SCOPES = {PAIR: PAIR, ACCOUNT: ACCOUNT, DEVICE: PAIR}

#: The device cookie: sent only to the login form, renewed at every sign-in.
DEVICE_COOKIE = "taskfinder_admin_device"
DEVICE_COOKIE_PATH = "/admin/login"
DEVICE_COOKIE_MAX_AGE_S = 90 * 24 * 3600
DEVICE_COOKIE_SALT = "taskfinder.admin.device-cookie"   # its signatures are worth nothing elsewhere
_DEVICE_ID = re.compile(r"[0-9a-f]{32}")


def account_name(name: str) -> str:
    return (name or "").strip().lower()[:64]


@dataclass(frozen=True)
class Lockout:
    seconds: float   # until the next attempt is taken (0: now)
    window: str      # PAIR or ACCOUNT: which window is full


OPEN = Lockout(0.0, "")


#: The account back-off's longest wait (LOGIN_ACCOUNT_BACKOFF_MAX_S's default).
BACKOFF_MAX_S = 60


class LoginThrottle:
    """The windows of one sign-in attempt. `device` is the id from a valid device cookie for
    `name` (DeviceCookies.device_for), None for a browser the account has not signed in from.
    `clock` (unix seconds) times the account back-off; the windows are the storage's own."""

    def __init__(self, storage: Storage, max_failures: int, window_s: int, account_max_failures: int = 0,
                 account_backoff_max_s: int = BACKOFF_MAX_S, clock: Callable[[], float] = time.time):
        self.storage = storage
        self.limiter = MovingWindowRateLimiter(storage)
        self.clock = clock
        self.rates = {PAIR: RateLimitItemPerSecond(max_failures, window_s),
                      DEVICE: RateLimitItemPerSecond(max_failures, window_s)}
        self.free_failures, self.backoff_max_s = account_max_failures, account_backoff_max_s
        if account_max_failures:
            # counted, never refusing by itself: past the free failures the back-off decides, and
            # past log2(cap) more the wait is at its cap, so counting further changes nothing
            steps = math.ceil(math.log2(max(2, account_backoff_max_s))) + 1
            self.rates[ACCOUNT] = RateLimitItemPerSecond(account_max_failures + steps, window_s)

    def _windows(self, device: str | None) -> list[str]:
        """The windows that count an attempt: a known device's own instead of the account's."""
        second = DEVICE if device else ACCOUNT
        return [window for window in (PAIR, second) if window in self.rates]

    @staticmethod
    def _subject(window: str, name: str, address: str | None, device: str | None) -> str:
        if window == ACCOUNT:
            return account_name(name)
        if window == DEVICE:
            return f"{account_name(name)}|device:{device}"
        return f"{account_name(name)}|{client_key(address)}"

    def locked_for(self, name: str, address: str | None, device: str | None = None) -> Lockout:
        """How long until this attempt may be made, and which window holds it back."""
        now = time.time()
        for window in self._windows(device):
            if window == ACCOUNT:
                wait = self._backoff_left(name)
                if wait > 0:
                    return Lockout(max(1.0, math.ceil(wait)), ACCOUNT)
                continue
            rate, subject = self.rates[window], self._subject(window, name, address, device)
            if not self.limiter.test(rate, subject, SCOPES[window]):
                reset = self.limiter.get_window_stats(rate, subject, SCOPES[window]).reset_time
                return Lockout(max(1.0, math.ceil(reset - now)), window)
        return OPEN

    def failed(self, name: str, address: str | None, device: str | None = None) -> None:
        for window in self._windows(device):
            self.limiter.hit(self.rates[window], self._subject(window, name, address, device), SCOPES[window])
            if window == ACCOUNT:
                self._back_off(name)

    def succeeded(self, name: str, address: str | None, device: str | None = None) -> None:
        """Empty the windows this attempt was counted in. From a known device that leaves the
        account window alone: the owner signing in must not hand a botnet a fresh budget."""
        for window in self._windows(device):
            self.limiter.clear(self.rates[window], self._subject(window, name, address, device), SCOPES[window])
            if window == ACCOUNT:
                self.storage.clear(self._backoff_key(name))

    # -- the account back-off --------------------------------------------------------------------
    def _backoff_key(self, name: str) -> str:
        """The storage key holding when the account's next attempt may be made (ms of `clock`),
        under the account window's scope (counted in this process while Redis is down)."""
        return RateLimitItemPerSecond(1, self.backoff_max_s).key_for(f"{account_name(name)}|backoff", SCOPES[ACCOUNT])

    def _back_off(self, name: str) -> None:
        """After a failure counted in the account window: past the free failures, the account's
        next attempt waits 2^(failures - free) seconds, at most backoff_max_s."""
        rate = self.rates[ACCOUNT]
        stats = self.limiter.get_window_stats(rate, account_name(name), SCOPES[ACCOUNT])
        failures = rate.amount - stats.remaining
        if failures < self.free_failures:
            return
        wait = min(float(self.backoff_max_s), 2.0 ** (failures - self.free_failures))
        key = self._backoff_key(name)
        self.storage.clear(key)   # the storage can only add to a count: start from nothing
        self.storage.incr(key, math.ceil(wait) + 1, int((self.clock() + wait) * 1000))

    def _backoff_left(self, name: str) -> float:
        """Seconds until the account's next attempt may be made (0: now). Never more than the
        cap: two failures written at once add up to a time far ahead, read as the cap."""
        until_ms = self.storage.get(self._backoff_key(name))
        if not until_ms:
            return 0.0
        return min(until_ms / 1000 - self.clock(), float(self.backoff_max_s))


class DeviceCookies:
    """Issue and verify device cookies: itsdangerous signatures with the app's secret key (the
    one that signs sessions), under their own salt, timestamped so that one older than
    `max_age_s` is refused server-side whatever the browser kept. The payload names the account
    and a random device id, the key of the device's window; it is signed, not secret."""

    def __init__(self, secret_key: str | bytes, max_age_s: int = DEVICE_COOKIE_MAX_AGE_S):
        self.serializer = URLSafeTimedSerializer(secret_key, salt=DEVICE_COOKIE_SALT)
        self.max_age_s = max_age_s

    def issue(self, name: str) -> str:
        """A new device cookie value for account `name` (a fresh device id at every sign-in)."""
        return self.serializer.dumps({"account": account_name(name), "device": secrets.token_hex(16)})

    def device_for(self, cookie: str | None, name: str) -> str | None:
        """The device id of `cookie` when it is genuine, unexpired and names the account `name`
        signs in as; otherwise None: that attempt is a stranger's, whatever the cookie says."""
        if not cookie:
            return None
        try:
            payload = self.serializer.loads(cookie, max_age=self.max_age_s)
        except BadData:
            return None
        if not isinstance(payload, dict) or payload.get("account") != account_name(name):
            return None
        device = payload.get("device")
        return device if isinstance(device, str) and _DEVICE_ID.fullmatch(device) else None


def build_throttle(settings, storage: Storage) -> LoginThrottle:
    return LoginThrottle(storage, settings.login_max_failures, settings.login_lockout_s,
                         settings.login_account_max_failures, settings.login_account_backoff_max_s)
