"""API tokens moved from ``rewards`` to the ``api`` app: a token made before the move keeps authenticating after
``migrate`` (same row, hash, scope and user), on the renamed table, and the move migrates back the same way."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from rest_framework.test import APIClient

import rewards.models
from api.models import ApiToken, hash_token
from api.services import authenticate_token

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("rewards", "0003_dataset_version_ready_only")]  # the api app depends on the move: unapplied with it
RAW = "stp_" + "k" * 43


def _migrate(targets: list[tuple[str, str]]):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def _tables() -> set[str]:
    with connection.cursor() as cursor:
        return set(connection.introspection.table_names(cursor))


def test_a_token_made_before_the_move_authenticates_after_it() -> None:
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    old = _migrate(BEFORE)
    assert "rewards_apitoken" in _tables() and "api_apitoken" not in _tables()
    user = old.get_model("auth", "User").objects.create(username="cron", is_active=True)
    before = old.get_model("rewards", "ApiToken").objects.create(
        user=user, name="nightly export", prefix=RAW[:12], key_hash=hash_token(RAW), scope="write")

    _migrate(leaves)
    assert "api_apitoken" in _tables() and "rewards_apitoken" not in _tables()
    token = authenticate_token(RAW)
    assert token is not None
    assert (token.pk, token.user.username, token.name, token.scope) == (before.pk, "cron", "nightly export", "write")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {RAW}")
    assert client.get("/api/campaigns/").status_code == 200
    assert ApiToken.objects.get().last_used_at is not None  # written through the moved model

    back = _migrate(BEFORE)
    assert back.get_model("rewards", "ApiToken").objects.get().key_hash == hash_token(RAW)
    assert "rewards_apitoken" in _tables()
    _migrate(leaves)
    assert authenticate_token(RAW) is not None


def test_rewards_keeps_no_copy_of_the_token_model() -> None:
    """One home: ``rewards.models`` neither defines nor re-exports the token names."""
    assert not {"ApiToken", "TOKEN_PREFIX", "hash_token"} & set(vars(rewards.models))
