"""The dashboard's start forms: one error convention (the page again, a 400, each error under its field's name in
``data-error-for``, the posted values kept) whether a form's own check or a service refused, and nothing started."""
from __future__ import annotations

import html
import re

from django.urls import reverse

from rewards.jobs.models import LabelingRound, MachineLabelingJob, SamplingJob, ScoringJob
from tests.factories import PASSWORD


def _post(client, user, name: str, campaign, data: dict) -> tuple[int, str]:
    client.login(username=user.username, password=PASSWORD)
    response = client.post(reverse(f"jobs:{name}", args=[campaign.slug]), data)
    return response.status_code, response.content.decode()


def _errors(page: str) -> dict[str, str]:
    return {field: html.unescape(message)
            for field, message in re.findall(r'<p class="error" data-error-for="([^"]+)">([^<]*)</p>', page)}


def test_sampling_form_names_the_field_and_keeps_what_was_typed(client, campaign_admin, loop_campaign) -> None:
    status, page = _post(client, campaign_admin, "sampling_start", loop_campaign,
                         {"n": "many", "temperature": "0.9", "max_new_tokens": "", "config": ""})
    assert status == 400 and _errors(page) == {"n": "n: Enter a whole number."}
    assert 'name="temperature" type="number" step="0.05" min="0" value="0.9"' in page  # kept as posted
    status, page = _post(client, campaign_admin, "sampling_start", loop_campaign, {"n": "2", "config": "[1, 2]"})
    assert status == 400 and _errors(page) == {"config": "config: must be a JSON object, got list"}
    status, page = _post(client, campaign_admin, "sampling_start", loop_campaign,
                         {"n": "2", "config": '{"temperature": 1e400}'})
    assert status == 400 and "config: is not usable" in _errors(page)["config"]
    status, page = _post(client, campaign_admin, "sampling_start", loop_campaign,
                         {"n": "2", "config": '{"no_such_key": 1}'})  # the sampler's own rules, in the service
    assert status == 400 and "no_such_key" in "".join(_errors(page).values())
    assert not SamplingJob.objects.filter(campaign=loop_campaign).exists()


def test_machine_labels_and_round_forms_use_the_same_convention(client, campaign_admin, loop_campaign) -> None:
    status, page = _post(client, campaign_admin, "machine_labels_start", loop_campaign,
                         {"method": "prm", "solutions": "3", "reward_model": "999999"})
    assert status == 400
    assert _errors(page) == {"reward_model": f"reward_model: no reward model 999999 in campaign {loop_campaign.slug}"}
    assert '<option value="prm" selected' in page  # the posted method stays chosen
    status, page = _post(client, campaign_admin, "machine_labels_start", loop_campaign,
                         {"method": "mc", "solutions": "0"})
    assert status == 400 and _errors(page) == {"solutions": "solutions: must be a whole number from 1 to 5000, got 0"}
    assert not MachineLabelingJob.objects.filter(campaign=loop_campaign).exists()
    status, page = _post(client, campaign_admin, "generation_start", loop_campaign,
                         {"strategy": "random", "batch_size": "lots"})
    assert status == 400 and _errors(page) == {"batch_size": "batch_size: Enter a whole number."}
    assert not LabelingRound.objects.filter(campaign=loop_campaign).exists()


def test_score_form_refuses_other_campaigns_models(client, campaign_admin, loop_campaign, loop_pool) -> None:
    status, page = _post(client, campaign_admin, "score_start", loop_campaign,
                         {"pool": str(loop_pool.pk), "models": ["12", "x"]})
    assert status == 400 and _errors(page) == {"models": "models: must be ids, got 'x'"}
    status, page = _post(client, campaign_admin, "score_start", loop_campaign, {"pool": "9" * 30})
    assert status == 400 and set(_errors(page)) == {"pool", "models"}
    assert not ScoringJob.objects.filter(pool=loop_pool).exists()
