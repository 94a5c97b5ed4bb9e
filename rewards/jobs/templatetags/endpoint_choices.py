"""``{% usable_endpoints_for campaign as endpoints %}``: the served endpoints the signed-in user may pick for a job
of ``campaign`` (``endpoints.selectors.usable_endpoints``), for the start forms' endpoint field."""
from __future__ import annotations

from typing import Any

from django import template

from endpoints.models import Endpoint
from endpoints.selectors import usable_endpoints

register = template.Library()


@register.simple_tag(takes_context=True)
def usable_endpoints_for(context: template.Context, campaign: Any) -> list[Endpoint]:
    request = context.get("request")
    if request is None or campaign is None:
        return []
    return list(usable_endpoints(request.user, campaign))
