"""What frames a whole import: its one transaction (``import_transaction``), fewer garbage collections while it
runs (``fewer_collections``) and a thread that parses the next batch while the database writes the last
(``read_ahead``)."""
from __future__ import annotations

import gc
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import connection, transaction

T = TypeVar("T")

# Optional progress hook of every importer: called with (phase, line number) every few hundred lines;
# phases are "validate" (first pass), "check" (solutions: problem lookups) and "import" (the writing pass).
ProgressCallback = Callable[[str, int], None]


def read_ahead(produce: Callable[[ProgressCallback | None], Iterator[T]], progress: ProgressCallback | None,
               depth: int = 2) -> Iterator[T]:
    """The batches of ``produce(progress)``, made by a background thread up to ``depth`` ahead of the consumer.

    An import alternates between parsing (Python, this process) and writing (the database server, which the
    process waits for): reading ahead lets the next batch be parsed while the server takes in the last one — a
    thread waiting on the database releases the GIL. The thread runs on its own database connection, outside the
    import's transaction: ``produce`` may only take ids from a PostgreSQL sequence there (``allocate_ids``:
    sequences hand out ids outside any transaction), nothing else — every other database call, ``progress``
    included (it is relayed), stays in the caller's thread. An exception in the thread is raised here; leaving
    early stops the thread.
    """
    handoff: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def send(kind: str, value: Any) -> None:
        while not stop.is_set():
            try:
                handoff.put((kind, value), timeout=0.1)
                return
            except queue.Full:
                continue

    def relay(phase: str, line: int) -> None:
        send("progress", (phase, line))

    def run() -> None:
        try:
            for item in produce(relay if progress is not None else None):
                send("item", item)
                if stop.is_set():
                    return
            send("end", None)
        except BaseException as error:  # noqa: BLE001 — handed to the consumer, which raises it
            send("error", error)
        finally:
            connection.close()  # this thread's own, if it opened one

    thread = threading.Thread(target=run, name="import-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = handoff.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            if kind == "progress":
                # a "progress" message carries the callback's arguments as a tuple
                progress(*value)  # type: ignore[misc]
                continue
            yield value
    finally:
        stop.set()
        thread.join()


# Allocations between two young-generation collections while an import runs (Python's default: 700).
IMPORT_GC_THRESHOLD = 100_000


@dataclass
class _Collector:
    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0  # imports running in this process
    previous: tuple[int, ...] = ()  # the thresholds before the first of them


_collector = _Collector()


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Let the cyclic garbage collector run less often for the duration (its thresholds are process-wide: the
    last of overlapping imports puts the previous ones back).

    An import allocates millions of short-lived containers (parsed rows, value tuples) and keeps a few batches
    of them alive: at the default threshold the collector ran 7,000 times per 200,000 ratings, each time walking
    the live batches, for half of the import's client CPU — yet these objects hold no cycles and are freed by
    reference counting.
    """
    with _collector.lock:
        if _collector.users == 0:
            _collector.previous = gc.get_threshold()
            gc.set_threshold(IMPORT_GC_THRESHOLD, *_collector.previous[1:])
        _collector.users += 1
    try:
        yield
    finally:
        with _collector.lock:
            _collector.users -= 1
            if _collector.users == 0:
                gc.set_threshold(*_collector.previous)


# SQLite page cache during an import, in KiB (negative: PRAGMA cache_size's unit is then KiB, not pages).
SQLITE_IMPORT_CACHE_KIB = 64 * 1024


@contextmanager
def import_transaction() -> Iterator[None]:
    """The one transaction an import writes in.

    On SQLite (the embedded default), for its duration: ``synchronous = NORMAL`` — with the WAL journal a crash
    or power loss can lose the last commits but never corrupt the file, and the import is one commit anyway; it
    is only changed in WAL mode and outside a transaction (an import job runs inside its own) — and a large page
    cache, so the indexes being appended to stay in memory. The previous values come back afterwards.
    """
    if connection.vendor != "sqlite":
        with transaction.atomic():
            yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        wal = cursor.fetchone()[0] == "wal"
        cursor.execute("PRAGMA synchronous")
        synchronous = cursor.fetchone()[0]
        cursor.execute("PRAGMA cache_size")
        cache_size = cursor.fetchone()[0]
        relax = wal and not connection.in_atomic_block
        if relax:
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute(f"PRAGMA cache_size = -{SQLITE_IMPORT_CACHE_KIB}")
    try:
        with transaction.atomic():
            yield
    finally:
        with connection.cursor() as cursor:
            if relax:
                cursor.execute(f"PRAGMA synchronous = {int(synchronous)}")
            cursor.execute(f"PRAGMA cache_size = {int(cache_size)}")
