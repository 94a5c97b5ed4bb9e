"""Where a secret (an endpoint's API key) shows up: every database row, every file under some folders (job
folders, exports), the broker's Redis, and any texts a test collected (pages, log lines, webhook payloads,
``job.error``). A test asserts the answer is empty after a job ran."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from django.apps import apps
from django.conf import settings


def rows_holding(secret: str) -> list[str]:
    """``app.Model#pk`` of every row whose values hold ``secret`` in plain text."""
    found = []
    for model in apps.get_models():
        for row in model.objects.values():
            if secret in repr(row):
                found.append(f"{model._meta.label}#{row.get('id', '?')}")
    return found


def files_holding(secret: str, folders: Iterable[Path]) -> list[str]:
    needle = secret.encode()
    return [str(path) for folder in folders if folder.exists() for path in folder.rglob("*")
            if path.is_file() and needle in path.read_bytes()]


def redis_keys_holding(secret: str) -> list[str]:
    """Keys of the configured Redis (the broker's queues, results, the cache) whose value holds ``secret``."""
    if not settings.REDIS_URL:
        return []
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    needle = secret.encode()
    found = []
    for key in client.scan_iter(count=500):
        kind = client.type(key)
        if kind == b"string":
            values = [client.get(key) or b""]
        elif kind == b"list":
            values = client.lrange(key, 0, -1)
        elif kind == b"hash":
            values = [v for pair in client.hgetall(key).items() for v in pair]
        elif kind == b"set":
            values = list(client.smembers(key))
        elif kind == b"zset":
            values = client.zrange(key, 0, -1)
        else:
            continue
        if any(needle in value for value in values):
            found.append(key.decode(errors="replace"))
    return found


def places_holding(secret: str, *, texts: Mapping[str, str] | None = None,
                   folders: Iterable[Path] = ()) -> list[str]:
    """Every place above that holds ``secret``; ``texts`` names what a test collected (e.g. {"log": caplog.text})."""
    return ([f"text:{name}" for name, text in (texts or {}).items() if secret in text]
            + [f"row:{row}" for row in rows_holding(secret)]
            + [f"file:{path}" for path in files_holding(secret, folders)]
            + [f"redis:{key}" for key in redis_keys_holding(secret)])
