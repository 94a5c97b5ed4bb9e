"""What the benchmarks that run a real server share: waiting until it answers."""
from __future__ import annotations

import time

import requests


def wait_until_healthy(base: str, *, attempts: int, pause_s: float) -> bool:
    """Poll ``{base}/healthz`` until it answers 200; a refused connection waits ``pause_s`` before the next try.
    False when it never did."""
    for _ in range(attempts):
        try:
            if requests.get(f"{base}/healthz", timeout=2).status_code == 200:
                return True
        except requests.RequestException:
            time.sleep(pause_s)
    return False
