"""API fixtures: the labeled campaign of tests/datasets, people in every role, tokens, a dataset version."""
from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from annotate.models import Membership, Role
from rewards.services.datasets import create_dataset_version
from rewards.services.tokens import create_token
from tests.datasets import conftest as datasets_conftest

# The fixtures of tests/datasets, offered here under their names (pytest looks fixtures up in a conftest's globals).
labeled_campaign = datasets_conftest.labeled_campaign
storage_dirs = datasets_conftest.storage_dirs


@pytest.fixture
def people(labeled_campaign, make_user, campaign_factory) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """owner (campaign admin), researcher (member), labeler (member), outsider (researcher elsewhere), staff."""
    users = {name: make_user(name) for name in ("owner", "researcher", "outsider")}
    users["staff"] = make_user("staffer", is_staff=True)
    users["labeler"] = labeled_campaign.memberships.get(role=Role.LABELER).user
    Membership.objects.create(campaign=labeled_campaign, user=users["owner"], role=Role.ADMIN)
    Membership.objects.create(campaign=labeled_campaign, user=users["researcher"], role=Role.RESEARCHER)
    other = campaign_factory("other", name="Other campaign")
    Membership.objects.create(campaign=other, user=users["outsider"], role=Role.RESEARCHER)
    return users


@pytest.fixture
def version(labeled_campaign, storage_dirs):  # type: ignore[no-untyped-def]
    made = create_dataset_version(labeled_campaign)
    assert made is not None
    return made


def token_client(user: Any, scope: str = "read") -> tuple[APIClient, str]:
    _, raw = create_token(user, name=f"{scope} script", scope=scope)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client, raw
