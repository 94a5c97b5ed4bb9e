"""``{{ job.dataset_path|no_server_paths }}``: what a page shows of a path is its name, never this server's folders."""
from __future__ import annotations

from typing import Any

from django import template

from ..text import without_server_paths

register = template.Library()


@register.filter
def no_server_paths(value: Any) -> str:
    return without_server_paths(str(value)) if value is not None else ""
