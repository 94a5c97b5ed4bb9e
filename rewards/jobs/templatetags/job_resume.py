"""``{% may_resume job kind as resumable %}``: whether a work page offers the signed-in user to resume ``job``
(``rewards.jobs.views_resume.may_resume``)."""
from __future__ import annotations

from typing import Any

from django import template

from ..views_resume import may_resume as offered

register = template.Library()


@register.simple_tag(takes_context=True)
def may_resume(context: template.Context, job: Any, kind: str) -> bool:
    request = context.get("request")
    return request is not None and offered(request.user, kind, job)
