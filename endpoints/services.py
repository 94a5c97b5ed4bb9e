"""Writes and actions on endpoints: registering one (its address checked against the outbound policy, its key
encrypted), removing one, testing the connection, and the environment a node job is given.

The key is decrypted only where a request is made (``selectors.served_model_for``) or handed to a node job's
environment (``job_environment``): never into a page, a message, a log line or the job's files."""
from __future__ import annotations

from django.conf import settings
from django.db import IntegrityError, transaction

from annotate import permissions
from annotate.models import Campaign
from rewards.served.client import ALLOW_SETTING, ChatClient, ServedError
from stepcore import outbound

from . import crypto
from .models import Endpoint
from .selectors import allow_for, served_model_for

MAX_CONCURRENCY = 256
MAX_TIMEOUT_S = 3600.0
MAX_TOKEN_BUDGET = 2_000_000_000  # the column is a 32-bit integer


class EndpointRefused(ValueError):
    """A registration the rules refuse; ``field`` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _rules(allowed: tuple[str, ...]) -> outbound.Rules:
    return outbound.Rules(allowed=allowed, deadline_s=1.0, max_answer_bytes=0, setting=ALLOW_SETTING)


def _check_address(base_url: str, *, staff: bool) -> None:
    operator = outbound.allowed_from(settings.STEPLAB_ENDPOINT_ALLOW)
    reason = outbound.refusal(base_url, rules=_rules(operator if staff else ()))
    if reason and not staff and not outbound.refusal(base_url, rules=_rules(operator)):
        reason += " Only staff may register an endpoint on an address the operator allows."
    if reason:
        raise EndpointRefused("base_url", reason)


@transaction.atomic
def register_endpoint(actor: permissions.Actor, *, campaign: Campaign | None, name: str, base_url: str, model: str,
                      api_key: str = "", max_concurrency: int = 4, timeout_s: float = 60.0,
                      token_budget: int = 200_000) -> Endpoint:
    """A new endpoint of ``campaign`` (None: staff-wide). ``NotAllowed`` unless ``actor`` manages endpoints there;
    ``EndpointRefused`` naming the field for a refused address or an out-of-range figure."""
    permissions.require(permissions.can_manage_endpoints, actor, campaign,
                        "only staff register staff-wide endpoints" if campaign is None else
                        f"only staff and admins of campaign {campaign.slug} register endpoints")
    name, base_url, model = name.strip(), base_url.strip(), model.strip()
    for field, value in (("name", name), ("base_url", base_url), ("model", model)):
        if not value:
            raise EndpointRefused(field, f"The {field.replace('_', ' ')} is empty.")
    if not 1 <= max_concurrency <= MAX_CONCURRENCY:
        raise EndpointRefused("max_concurrency", f"Max concurrency must be between 1 and {MAX_CONCURRENCY}.")
    if not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise EndpointRefused("timeout_s", f"The timeout must be above 0 and at most {MAX_TIMEOUT_S:g} s.")
    if not 1 <= token_budget <= MAX_TOKEN_BUDGET:
        raise EndpointRefused("token_budget", f"The token budget must be between 1 and {MAX_TOKEN_BUDGET:,}.")
    staff = actor is permissions.SYSTEM or permissions.is_staff(actor)
    _check_address(base_url, staff=staff)
    try:
        with transaction.atomic():
            return Endpoint.objects.create(
                campaign=campaign, name=name, base_url=base_url, model=model,
                api_key_encrypted=crypto.encrypt(api_key.strip()), max_concurrency=max_concurrency,
                timeout_s=timeout_s, token_budget=token_budget, created_by=permissions.account_of(actor),
                registered_by_staff=staff)
    except IntegrityError:
        raise EndpointRefused("name", f"An endpoint named {name!r} exists already here.") from None


@transaction.atomic
def delete_endpoint(actor: permissions.Actor, *, endpoint: Endpoint) -> None:
    permissions.require(permissions.can_manage_endpoints, actor, endpoint.campaign,
                        "only those who manage this endpoint's campaign remove it")
    endpoint.delete()


def check_connection(actor: permissions.Actor, *, endpoint: Endpoint) -> tuple[bool, str]:
    """Ask the server for its model list once (no retries): (True, the models) or (False, a short sanitised
    error). Holds no transaction while it waits on the server."""
    permissions.require(permissions.can_manage_endpoints, actor, endpoint.campaign,
                        "only those who manage this endpoint's campaign test it")
    try:
        models = ChatClient(served_model_for(endpoint), retries=0).models()
    except (ServedError, crypto.KeyUnreadable) as error:
        return False, str(error)
    served = ", ".join(models) or "(none)"
    if endpoint.model not in models:
        return False, f"The server answers, but does not serve {endpoint.model!r}; it serves: {served}."
    return True, f"Connected; the server serves: {served}."


def job_environment(endpoint: Endpoint, prefix: str = "STEPLAB_ENDPOINT") -> dict[str, str]:
    """The variables a node job reads with ``ServedModel.from_env``. The key is only ever passed this way (the
    process environment, a Kubernetes secret): never written to the job folder, its manifest or a message."""
    environment = {f"{prefix}_URL": endpoint.base_url, f"{prefix}_MODEL": endpoint.model,
                   f"{prefix}_TIMEOUT": f"{endpoint.timeout_s:g}", f"{prefix}_ALLOW": ",".join(allow_for(endpoint))}
    key = crypto.decrypt(endpoint.api_key_encrypted)
    if key:
        environment[f"{prefix}_KEY"] = key
    return environment
