"""Where a form's ``next`` may send the browser: only back into this site."""
from __future__ import annotations

from django.http import HttpRequest
from django.utils.http import url_has_allowed_host_and_scheme


def safe_next(request: HttpRequest, fallback: str) -> str:
    """The POSTed (else GET) ``next`` when it stays on this host (and on HTTPS when the request came in on it),
    else ``fallback``: a crafted link or form must not bounce an admin to another site."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                  require_https=request.is_secure()):
        return target
    return fallback
