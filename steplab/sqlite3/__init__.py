"""Django's SQLite backend for the embedded default, creating the database's folder on first connect."""
