"""Django's SQLite backend, plus the database file's folder made on first connect (``var/`` on a fresh checkout)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db.backends.sqlite3 import base


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        if not self.is_in_memory_db():
            Path(conn_params["database"]).parent.mkdir(parents=True, exist_ok=True)
        return super().get_new_connection(conn_params)
