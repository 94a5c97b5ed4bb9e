"""The labeling-round start address docs/labeling.md gives answers a GET with a page holding the start form (it used to
be a blank 405); the form on it POSTs back to the same address and starts the round."""
from __future__ import annotations

import pytest
from django.urls import reverse

from tests.labeling_rounds.conftest import hand_pool  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def test_the_start_address_answers_get_with_a_form_that_posts(client, personas, hand_pool) -> None:  # noqa: F811
    from rewards.jobs.models import LabelingRound

    slug = hand_pool.campaign.slug
    users = personas(hand_pool.campaign)
    url = f"/models/dashboard/{slug}/labeling-rounds/start/"
    assert reverse("jobs:labeling_round_start", args=[slug]) == url
    client.force_login(users["owner"])
    page = client.get(url)
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
    body = page.content.decode()
    assert f'<form method="post" action="{url}" data-start-generation>' in body
    assert 'name="strategy"' in body and 'name="batch_size"' in body and "csrfmiddlewaretoken" in body
    assert LabelingRound.objects.count() == 0  # a GET starts nothing

    started = client.post(url, {"strategy": "convincing_wrong", "batch_size": "2", "config": ""})
    assert (started.status_code, started["Location"]) == (302, f"/models/dashboard/{slug}/")
    assert LabelingRound.objects.count() == 1
    # the deprecated alias answers the same page
    assert client.get(f"/models/dashboard/{slug}/generations/start/").status_code == 200

    # Who may not start a round gets the same refusal as for the POST, not the form.
    client.force_login(users["researcher"])
    assert client.get(url).status_code == 403
    client.force_login(users["other_admin"])
    assert client.get(url).status_code == 404
    client.logout()
    assert client.get(url).status_code == 302  # to the login page
