"""The login limiter: sliding counters in the default cache, under a policy that lets nobody lock another out.

* ``STEPLAB_LOGIN_RATE``: failed attempts at one name from one address (another address's never count here);
* ``STEPLAB_LOGIN_ADDRESS_RATE``: failed attempts from one address over all names;
* ``STEPLAB_LOGIN_ACCOUNT_RATE``: how many different addresses may fail at one name (each counts once); past it,
  only an address that signed in to the name before gets in, until the count falls.

An attempt counts before the password is checked (concurrent guesses cannot all slip under) and is given back
when the password was right: only failures use up an allowance. Counts slide (this period's plus the previous
one's share still within a period). A cache outage fails open: the password decides, no labeler is locked out."""
from __future__ import annotations

import hashlib
import logging
import re

from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)
KNOWN_S = 30 * 86400  # how long an address that signed in to a name stays known to it
ACCOUNT = "STEPLAB_LOGIN_ACCOUNT_RATE"


def rate(setting: str) -> tuple[int, int]:
    """(limit, period in seconds) of a rate setting: "10/m" → (10, 60), "5/10m" → (5, 600)."""
    value = getattr(settings, setting)
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d*)\s*([smhd])\s*", value)
    if match is None:
        raise ValueError(f"{setting}: expected e.g. '10/m', got {value!r}")
    return int(match[1]), int(match[2] or 1) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match[3]]


def _key(*parts: object) -> str:
    return "login:" + hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:40]


def _over(kind: str, value: str, setting: str, now: float, *, add: bool = True) -> tuple[bool, str]:
    """Whether one more attempt (this one, added first when ``add``) passes the rate; this period's counter."""
    limit, period = rate(setting)
    key, previous = (_key(kind, period, int(now // period) - back, value) for back in (0, 1))
    if add:
        cache.add(key, 0, 2 * period + 5)
    current = cache.incr(key) if add else cache.get(key, 0) + 1
    return current + cache.get(previous, 0) * (1 - now % period / period) > limit, key


def attempt(counts: list[tuple[str, str, str]], *, now: float,
            account: tuple[str, str] | None = None) -> tuple[bool, list[str]]:
    """Count one attempt on each (kind, value, setting): whether to refuse it, and the counters to give back if the
    password proves right. ``account`` (name, address): the name's failing addresses are checked too."""
    try:
        results = [_over(*count, now) for count in counts]
        limited = any(over for over, _ in results) or account is not None and (
            _over("account", account[0], ACCOUNT, now, add=False)[0] and not cache.get(_key("known", *account)))
    except Exception:  # noqa: BLE001 - any cache failure
        logger.warning("login rate limiter unavailable (cache down); allowing the attempt", exc_info=True)
        return False, []
    return limited, [key for _, key in results]


def succeeded(keys: list[str], *, account: tuple[str, str] | None = None) -> None:
    """The password was right: the attempt's counts given back; the address known to the name from now on."""
    try:
        if account is not None:
            cache.set(_key("known", *account), 1, KNOWN_S)
        for key in keys:
            cache.decr(key)
    except Exception:  # noqa: BLE001 - expired meanwhile, or the cache is down: nothing to give back
        logger.debug("login counters not given back", exc_info=True)


def failed(name: str, address: str, *, now: float) -> None:
    """This address failed at ``name``: counted once a period among the name's failing addresses."""
    try:
        _, period = rate(ACCOUNT)
        if cache.add(_key("failing", period, int(now // period), name, address), 1, 2 * period + 5):
            _over("account", name, ACCOUNT, now)
    except Exception:  # noqa: BLE001 - the cache is down: the pair and address limits failed open too
        logger.debug("failing address of %s not counted", name, exc_info=True)
