"""``slot(endpoint)``: hold one of an endpoint's ``max_concurrency`` request slots across every worker and
process, so that jobs together never send a served model more requests at once than its operator allows.

With ``REDIS_URL`` the slots are a Redis sorted set (holder -> lease expiry, claimed by one Lua script); on the
embedded default (no Redis) they are ``EndpointSlot`` rows claimed by one conditional UPDATE each. A holder renews
its lease every third of it while it holds the slot (a node job's watcher may hold one for hours); a slot whose
holder died is taken back once its lease has run out.
"""
from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import cache

import redis
from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from rewards.served.client import MAX_RETRY_AFTER_S, ServedUnavailable

from .models import Endpoint, EndpointSlot

#: How long a waiting worker polls at most between two tries for a free slot.
MAX_POLL_S = 0.5
DEFAULT_WAIT_S = 600.0

_CLAIM = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return 1
end
return 0
"""


class SlotUnavailable(ServedUnavailable):
    """No slot came free within the wait: the endpoint is saturated by other jobs."""


def default_lease_s(endpoint: Endpoint) -> float:
    """How long a claim counts as alive: one call with its retries and a longest honoured Retry-After."""
    return endpoint.timeout_s * 6 + MAX_RETRY_AFTER_S


@cache
def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def _redis_key(endpoint: Endpoint) -> str:
    return f"steplab:endpoint:{endpoint.pk}:slots"


def _claim_redis(endpoint: Endpoint, token: str, lease: float) -> bool:
    now = time.time()
    claimed = _redis(settings.REDIS_URL).eval(_CLAIM, 1, _redis_key(endpoint), now, endpoint.max_concurrency,
                                              now + lease, token, int(lease * 1000) + 1000)
    return bool(claimed)


def _renew_redis(endpoint: Endpoint, token: str, lease: float) -> None:
    client = _redis(settings.REDIS_URL)
    client.zadd(_redis_key(endpoint), {token: time.time() + lease}, xx=True)
    client.pexpire(_redis_key(endpoint), int(lease * 1000) + 1000)


def _release_redis(endpoint: Endpoint, token: str) -> None:
    _redis(settings.REDIS_URL).zrem(_redis_key(endpoint), token)


def _claim_database(endpoint: Endpoint, token: str, lease: float) -> bool:
    EndpointSlot.objects.bulk_create([EndpointSlot(endpoint=endpoint, number=n)
                                      for n in range(endpoint.max_concurrency)], ignore_conflicts=True)
    now = timezone.now()
    stale = now - timedelta(seconds=lease)
    free = Q(holder="") | Q(claimed_at__lt=stale)
    for number in range(endpoint.max_concurrency):
        if EndpointSlot.objects.filter(free, endpoint=endpoint, number=number).update(holder=token, claimed_at=now):
            return True
    return False


def _renew_database(endpoint: Endpoint, token: str, lease: float) -> None:
    try:
        EndpointSlot.objects.filter(endpoint=endpoint, holder=token).update(claimed_at=timezone.now())
    finally:
        connection.close()  # the renewing thread's own connection


def _release_database(endpoint: Endpoint, token: str) -> None:
    EndpointSlot.objects.filter(endpoint=endpoint, holder=token).update(holder="", claimed_at=None)


def holders(endpoint: Endpoint, *, lease_s: float | None = None) -> int:
    """How many slots are held now (live claims only)."""
    if settings.REDIS_URL:
        return int(_redis(settings.REDIS_URL).zcount(_redis_key(endpoint), time.time(), "+inf"))
    stale = timezone.now() - timedelta(seconds=lease_s or default_lease_s(endpoint))
    return EndpointSlot.objects.filter(endpoint=endpoint, number__lt=endpoint.max_concurrency,
                                       claimed_at__gte=stale).exclude(holder="").count()


@contextmanager
def slot(endpoint: Endpoint, *, wait_s: float = DEFAULT_WAIT_S, lease_s: float | None = None) -> Iterator[None]:
    """Hold one slot for the block; ``SlotUnavailable`` when none came free within ``wait_s``. ``lease_s`` (the
    default: ``default_lease_s``) is how long a claim outlives a holder that stopped renewing it. On the database,
    call it outside any transaction: the renewing thread's own connection must see the claimed row."""
    use_redis = bool(settings.REDIS_URL)
    claim, renew, release = ((_claim_redis, _renew_redis, _release_redis) if use_redis
                             else (_claim_database, _renew_database, _release_database))
    lease = lease_s or default_lease_s(endpoint)
    token = secrets.token_hex(16)
    deadline = time.monotonic() + wait_s
    pause = 0.01
    while not claim(endpoint, token, lease):
        if time.monotonic() >= deadline:
            raise SlotUnavailable(f"All {endpoint.max_concurrency} request slots of endpoint {endpoint.name!r} "
                                  f"stayed busy for {wait_s:g} s.")
        time.sleep(pause)
        pause = min(MAX_POLL_S, pause * 2)
    released = threading.Event()

    def keep() -> None:
        while not released.wait(lease / 3):
            renew(endpoint, token, lease)

    renewer = threading.Thread(target=keep, daemon=True, name=f"endpoint-slot-{endpoint.pk}")
    renewer.start()
    try:
        yield
    finally:
        released.set()
        renewer.join()
        release(endpoint, token)
