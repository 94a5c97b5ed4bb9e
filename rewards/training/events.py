"""The job's progress log, ``events.jsonl``."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def rank() -> int:
    """This process's rank under a data-parallel launcher (0 alone)."""
    return int(os.environ.get("RANK", "0"))


class EventLog:
    """Append-only JSON-lines progress log, flushed per event so a web process can tail it."""

    def __init__(self, path: Path, *, main: bool) -> None:
        self.path = path
        self.main = main
        self.started = time.time()
        path.parent.mkdir(parents=True, exist_ok=True)
        if main:
            path.write_text("", encoding="utf-8")

    def write(self, event: str, *, always: bool = False, **fields: Any) -> None:
        """Record an event (main process only, unless ``always``: errors come from every rank)."""
        if not (self.main or always):
            return
        now = time.time()
        record = {"event": event, "time": round(now, 3), "elapsed_s": round(now - self.started, 3), **fields}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=str) + "\n")
            handle.flush()
