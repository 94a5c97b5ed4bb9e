"""Filters of the console log (settings.LOGGING), importable before the apps are (no Django models, no DRF)."""
from __future__ import annotations

import logging


class RefusalsInOneLine(logging.Filter):
    """A refused request (403) is routine, not a fault: Django logs it with the PermissionDenied's traceback;
    this keeps the line and drops the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info, record.exc_text = None, None
        return True
