"""API fixtures: the labeled MATH-500 campaign of tests/datasets, its people in every role, tokens, a version."""
from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from annotate.models import Role
from api.services import create_token
from rewards.services.datasets import create_dataset_version
from tests.datasets.conftest import math500_campaign, storage_dirs  # noqa: F401  (fixtures)


@pytest.fixture
def people(math500_campaign, personas):  # noqa: F811  (a fixture)
    """owner (campaign admin), researcher and labeler (the one who labeled everything) of the campaign, outsider
    (researcher of another campaign only), staff."""
    return personas(math500_campaign, labeler=math500_campaign.memberships.get(role=Role.LABELER).user,
                    outsider_role=Role.RESEARCHER)


@pytest.fixture
def version(math500_campaign, storage_dirs):  # noqa: F811  (fixtures)
    made = create_dataset_version(math500_campaign)
    assert made is not None
    return made


def token_client(user: Any, scope: str = "read") -> tuple[APIClient, str]:
    _, raw = create_token(user, name=f"{scope} script", scope=scope)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client, raw
