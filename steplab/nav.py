"""Which parts of the site the signed-in user may reach, for the nav: links a role cannot open are not shown.

Worked out at login and kept in the session, then refreshed every few minutes, so a page costs no query for
the nav (the workspace's query budget is flat) while a membership granted or revoked shows up soon after.
"""
from __future__ import annotations

import time
from typing import Any

from django.http import HttpRequest

SESSION_KEY = "steplab_nav"
REFRESH_SECONDS = 300


def _places(user: Any) -> dict[str, Any]:
    from annotate.permissions import can_manage_any, can_research_any

    return {"manage": can_manage_any(user), "research": can_research_any(user), "at": time.time()}


def remember_places(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    """Connected to ``user_logged_in`` in ``AnnotateConfig.ready``."""
    if request is not None and hasattr(request, "session"):
        request.session[SESSION_KEY] = _places(user)


def nav(request: HttpRequest) -> dict[str, Any]:
    """``nav.manage`` (staff, campaign admins) and ``nav.research`` (staff, admins, researchers)."""
    user = getattr(request, "user", None)
    session = getattr(request, "session", None)
    if user is None or session is None or not user.is_authenticated:
        return {"nav": {"manage": False, "research": False}}
    places = session.get(SESSION_KEY)
    if not isinstance(places, dict) or time.time() - float(places.get("at", 0)) > REFRESH_SECONDS:
        places = _places(user)
        session[SESSION_KEY] = places
    return {"nav": places}
