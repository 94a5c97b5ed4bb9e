"""Reads: the endpoints a user may see, manage or pick for a job, and the served model a job is given."""
from __future__ import annotations

from django.conf import settings
from django.db.models import Q, QuerySet

from annotate import permissions
from annotate.models import Campaign
from rewards.served.client import ServedModel
from stepcore import outbound

from . import crypto
from .models import Endpoint


def allow_for(endpoint: Endpoint) -> tuple[str, ...]:
    """The private addresses this endpoint may reach: the operator's list for staff-registered ones, none else."""
    return outbound.allowed_from(settings.STEPLAB_ENDPOINT_ALLOW) if endpoint.registered_by_staff else ()


def served_model_for(endpoint: Endpoint) -> ServedModel:
    """What an in-worker job calls: the key decrypted here, in the process, and kept out of the model's repr."""
    return ServedModel(base_url=endpoint.base_url, model=endpoint.model,
                       api_key=crypto.decrypt(endpoint.api_key_encrypted) or None,
                       timeout_s=endpoint.timeout_s, allow=allow_for(endpoint))


def usable_endpoints(actor: permissions.Actor, campaign: Campaign) -> QuerySet[Endpoint]:
    """The endpoints ``actor`` may pick for a job on ``campaign``: the campaign's and the staff-wide ones, for
    whoever may start machine labeling or sampling there; none for anyone else."""
    if actor is not permissions.SYSTEM and not (permissions.can_start_machine_labeling(actor, campaign)
                                                or permissions.can_start_sampling(actor, campaign)):
        return Endpoint.objects.none()
    return Endpoint.objects.filter(Q(campaign=campaign) | Q(campaign__isnull=True))


def managed_endpoints(user: permissions.Actor, campaign: Campaign | None) -> QuerySet[Endpoint]:
    """The endpoints listed on a management page: the campaign's, or the staff-wide ones."""
    if not permissions.can_manage_endpoints(user, campaign):
        return Endpoint.objects.none()
    return Endpoint.objects.filter(campaign=campaign) if campaign is not None else \
        Endpoint.objects.filter(campaign__isnull=True)
