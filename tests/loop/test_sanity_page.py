"""The training job's "Sanity checks": the trainer's ``sanity`` report, each figure with what it says in plain words;
a model trained before the checks says so instead of an empty section."""
from __future__ import annotations

import html
import json
import re

from django.urls import reverse

from rewards.evaluation.sanity import SanitySolution, sanity_checks
from rewards.jobs.models import JobStatus
from tests.factories import PASSWORD, TrainingJobFactory


def _answer_reader(solutions: list[SanitySolution]) -> list[list[float]]:
    """A scorer that learned the answer format: every step 0.6, a ``# Answer`` step 0.95, a prefixed step lower."""
    return [[0.95 if "# Answer" in step else (0.4 if step.startswith("Let's note") else 0.6) for step in s.steps]
            for s in solutions]


def _solutions() -> list[SanitySolution]:
    return [SanitySolution(f"What is {a}+{a}?", [f"{a}+{a} = {2 * a + (k % 2)}", f"So we get {2 * a + (k % 2)}.",
                                                  f"# Answer\n\n{2 * a + (k % 2)}"], 0 if k % 2 else None)
            for k, a in enumerate(range(2, 14))]


def _rows(page: str) -> dict[str, tuple[str, str, str]]:
    card = page[page.index('data-card="sanity"'):]
    card = card[:card.index("</div>")]
    return {key: (flagged, html.unescape(figure), html.unescape(reading)) for key, flagged, figure, reading in
            re.findall(r'<tr data-sanity="([a-z_]+)" data-flagged="(true|false)"><td>[^<]*</td>\s*'
                       r'<td data-figure-value>([^<]*)</td><td[^>]*>([^<]*)</td></tr>', card)}


def test_the_job_page_reads_each_sanity_check_in_plain_words(client, campaign_admin, loop_campaign) -> None:
    report = sanity_checks(_solutions(), _answer_reader, seed=0).as_dict()
    metrics = json.loads(json.dumps({"kind": "prm", "method": "head", "train": {"loss": 0.3}, "sanity": report}))
    job = TrainingJobFactory(campaign=loop_campaign, status=JobStatus.SUCCEEDED, metrics=metrics)
    client.login(username=campaign_admin.username, password=PASSWORD)
    rows = _rows(client.get(reverse("jobs:job", args=[job.pk])).content.decode())
    assert set(rows) == {"answer_rewrite", "harmless_prefix", "shuffle", "last_step_lowest"}
    change = report["answer_rewrite"]["mean_abs_change"]
    assert change > 0.05 and rows["answer_rewrite"] == (
        "true", f"{change:.2f}", f"The score moves {change:.2f} when only the answer's format changes: it reads "
                                 "format.")
    shift = report["harmless_prefix"]["mean_logit_change"]
    assert shift < -0.1 and rows["harmless_prefix"][0] == "true"
    assert rows["harmless_prefix"][2] == (f"A prefix that says nothing moves a step's log-odds by {shift:+.2f}: it "
                                          "reads wording, not maths.")
    last = report["last_step_lowest"]
    assert rows["last_step_lowest"][0] == ("true" if last["model_rate"] - last["data_rate"] > 0.10 else "false")
    assert f"in {100 * last['data_rate']:.1f} %" in rows["last_step_lowest"][2]


def test_a_sound_model_reads_as_passing_and_an_unmeasured_check_says_why(client, campaign_admin,
                                                                         loop_campaign) -> None:
    sanity = {"answer_rewrite": {"n": 0, "mean_abs_change": None},
              "harmless_prefix": {"n": 120, "mean_logit_change": 0.02},
              "shuffle": {"n": 120, "spearman": 0.31},
              "last_step_lowest": {"n": 40, "model_rate": 0.1, "data_rate": 0.075}}
    job = TrainingJobFactory(campaign=loop_campaign, status=JobStatus.SUCCEEDED,
                             metrics={"method": "head", "sanity": sanity})
    client.login(username=campaign_admin.username, password=PASSWORD)
    rows = _rows(client.get(reverse("jobs:job", args=[job.pk])).content.decode())
    assert rows["answer_rewrite"] == ("false", "–", "Not measured: no step held an answer line.")
    assert rows["harmless_prefix"] == ("false", "+0.02", "A prefix that says nothing moves a step's log-odds by "
                                                         "+0.02: empty wording barely moves it.")
    assert rows["shuffle"][0] == "false" and rows["shuffle"][2].endswith("what came before a step matters to it.")
    assert rows["last_step_lowest"] == ("false", "10.0 % (data 7.5 %)", "Its lowest score falls on the last step "
                                        "in 10.0 % of flawed solutions, where the first error is in 7.5 %: close to "
                                        "where the errors are.")


def test_a_model_from_before_the_checks_says_so(client, campaign_admin, loop_campaign) -> None:
    job = TrainingJobFactory(campaign=loop_campaign, status=JobStatus.SUCCEEDED,
                             metrics={"method": "head", "train": {"loss": 0.3}})
    client.login(username=campaign_admin.username, password=PASSWORD)
    page = client.get(reverse("jobs:job", args=[job.pk])).content.decode()
    assert "data-sanity-absent" in page and "data-sanity=" not in page
    assert "trained before Steplab ran its sanity checks" in page
    queued = TrainingJobFactory(campaign=loop_campaign)  # no metrics yet: no section at all
    assert 'data-card="sanity"' not in client.get(reverse("jobs:job", args=[queued.pk])).content.decode()
