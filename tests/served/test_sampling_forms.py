"""The dashboard's start forms offer the endpoints a user may use (``usable_endpoints``): sampling, Monte-Carlo
labeling and the labeling round's "sample from a served policy first"; an endpoint of another campaign is
refused as one that does not exist, and nothing is queued then. No server is needed: nothing runs."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rewards.jobs.models import MachineLabelingJob, SamplingJob

pytestmark = pytest.mark.django_db


def _options(page: str) -> list[str]:
    return [part.split('"', 1)[0] for part in page.split('<select name="endpoint" data-endpoint-choice>')[1]
            .split("</select>", 1)[0].split('<option value="')[1:]]


def test_the_forms_offer_the_usable_endpoints_and_start_served_jobs(client, served_campaign: Any,
                                                                    django_capture_on_commit_callbacks) -> None:
    campaign, people, ours, theirs = served_campaign
    client.force_login(people.owner)
    page = client.get(f"/models/dashboard/{campaign.slug}/").content.decode()
    assert page.count("data-endpoint-choice") == 3  # sampling, Monte-Carlo, the labeling round
    assert _options(page) == ["", str(ours.pk)] and "served: our vllm (policy-7b)" in page
    assert "their vllm" not in page

    base = f"/models/dashboard/{campaign.slug}"
    with django_capture_on_commit_callbacks(execute=False):
        refused = client.post(f"{base}/sampling/start/", {"n": "2", "endpoint": str(theirs.pk)})
        assert refused.status_code == 400 and 'data-error-for="endpoint"' in refused.content.decode()
        assert not SamplingJob.objects.exists()
        assert client.post(f"{base}/sampling/start/", {"n": "2", "endpoint": str(ours.pk)}).status_code == 302
        assert client.post(f"{base}/machine-labels/start/", {"method": "mc", "solutions": "1", "rollouts": "2",
                                                             "endpoint": str(ours.pk)}).status_code == 302
        assert client.post(f"{base}/labeling-rounds/start/", {"strategy": "random", "batch_size": "2",
                                                              "endpoint": str(ours.pk), "samples": "3"}
                           ).status_code == 302
    served = {"backend": "served", "model": "policy-7b", "token_budget": 5000, "endpoint": ours.pk}
    first, feeding = SamplingJob.objects.order_by("pk")
    assert first.config == {"n": 2, **served}
    assert feeding.config == {"n": 3, **served, "labeling_round": {
        "strategy": "random", "strategy_config": feeding.config["labeling_round"]["strategy_config"], "batch_size": 2,
        "by_system": False}}
    assert MachineLabelingJob.objects.get().config == {"rollouts": 2, **served}
    job_file = json.loads((Path(first.work_dir) / "job.json").read_text())
    assert job_file["backend"] == "served" and "endpoint" not in job_file


def test_a_researcher_is_offered_no_endpoint_and_a_served_key_set_by_hand_is_refused(
        client, served_campaign: Any, django_capture_on_commit_callbacks) -> None:
    campaign, people, ours, _ = served_campaign
    from rewards.jobs.services.sampling import start_sampling_job
    from rewards.jobs.services.training import JobInputError

    client.force_login(people.researcher)
    assert "data-endpoint-choice" not in client.get(f"/models/dashboard/{campaign.slug}/").content.decode()
    for config, endpoint, field in [({"backend": "served"}, None, "endpoint"),
                                    ({"model": "smollm2"}, ours, "model"),
                                    ({"backend": "vllm"}, ours, "backend")]:
        with pytest.raises(JobInputError) as refused:
            start_sampling_job(campaign, config=config, endpoint=endpoint, user=people.owner)
        assert refused.value.field == field
    # the other campaign's admin may sample there, but not from this campaign's endpoint
    with pytest.raises(JobInputError, match=f"no endpoint {ours.pk} you may use in campaign"):
        start_sampling_job(people.elsewhere, config={}, endpoint=ours, user=people.other_admin)
    assert not SamplingJob.objects.exists()
