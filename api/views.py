"""The API token pages (session login): list and create your tokens, revoke one. Rules live in ``api.services``."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from steplab.http import AppRequest

from .models import ApiToken
from .services import TokenError, create_token, revoke_token


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: AppRequest) -> HttpResponse:
    """List the user's tokens; POST makes one and shows its raw value this one time."""
    new_token = None
    status = 200
    if request.method == "POST":
        try:
            _, new_token = create_token(request.user, name=request.POST.get("name", ""),
                                        scope=request.POST.get("scope", ""))
        except TokenError as error:
            messages.error(request, str(error))
            status = 400
    return render(request, "api/tokens.html", {
        "tokens": ApiToken.objects.filter(user=request.user), "new_token": new_token,
        "scopes": ApiToken.Scope.choices,
    }, status=status)


@login_required
@require_POST
def revoke(request: AppRequest, token_id: int) -> HttpResponse:
    """Someone else's token answers 404, as a missing one does: whether it exists is not theirs to learn."""
    try:
        token = revoke_token(request.user, token_id)
    except TokenError as error:
        raise Http404(str(error)) from error
    messages.success(request, f"Token {token.prefix}… revoked.")
    return redirect("pages:tokens")
