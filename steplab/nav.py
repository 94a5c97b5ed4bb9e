"""Which parts of the site the signed-in user may reach, for the nav: links a role cannot open are not shown.

Each app registers its places and who may reach them (``register`` in its ``AppConfig.ready``; the labeling app
registers ``manage`` and ``research`` from its permissions), so this module decides nothing itself. Worked out at
login and kept in the session, then refreshed every few minutes, so a page costs no query for the nav (the
workspace's query budget is flat) while a membership granted or revoked shows up soon after.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest

SESSION_KEY = "steplab_nav"
REFRESH_SECONDS = 300
_places: dict[str, Callable[[Any], bool]] = {}


def register(place: str, may_reach: Callable[[Any], bool]) -> None:
    """``nav.<place>`` in templates: whether ``may_reach(user)`` holds for the signed-in user."""
    _places[place] = may_reach


def _reachable(user: Any) -> dict[str, Any]:
    return {**{place: bool(may_reach(user)) for place, may_reach in _places.items()}, "at": time.time()}


def remember_places(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    """Connected to ``user_logged_in`` in ``AnnotateConfig.ready``."""
    if request is not None and hasattr(request, "session"):
        request.session[SESSION_KEY] = _reachable(user)


def nav(request: HttpRequest) -> dict[str, Any]:
    """The context processor: ``nav`` maps each registered place to whether the user may reach it."""
    user = getattr(request, "user", None)
    session = getattr(request, "session", None)
    if user is None or session is None or not user.is_authenticated:
        return {"nav": dict.fromkeys(_places, False)}
    places = session.get(SESSION_KEY)
    if (not isinstance(places, dict) or time.time() - float(places.get("at", 0)) > REFRESH_SECONDS
            or not _places.keys() <= places.keys()):
        places = _reachable(user)
        session[SESSION_KEY] = places
    return {"nav": places}
