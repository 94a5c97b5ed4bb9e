"""What the pages say: durations and labels a person reads, the campaign form's defaults and help, the import
formats with sample files that import as they are, dataset versions with their changes, and a nav that offers
each role only the places it may open."""
from __future__ import annotations

import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.models import CampaignMetrics, Membership, Problem, Role, Solution
from annotate.templatetags.steplab_format import choice_label, duration, samples_progress
from rewards.models import DatasetVersion
from steplab.jobs import JobStatus
from steplab.nav import SESSION_KEY
from tests.manage.test_imports import finished_import, upload

SAMPLES = Path(settings.BASE_DIR) / "static" / "steplab" / "samples"


@pytest.mark.parametrize("ms, text", [
    (427786, "7 min 8 s"), (512, "512 ms"), (4321, "4.3 s"), (45_000, "45 s"), (120_000, "2 min"),
    (3_725_000, "1 h 2 min"), (None, "—"), ("", "—"), (-5, "—"),
])
def test_duration_reads_as_minutes_and_seconds(ms: object, text: str) -> None:
    assert duration(ms) == text


def test_enum_values_read_as_their_labels() -> None:
    assert choice_label("found_error", "finish_reason") == "Found an error"
    assert choice_label("prm800k", "import_kind") == "PRM800K labels (JSONL)"
    assert choice_label("something_new", "finish_reason") == "something_new"  # unknown values are not hidden
    assert choice_label(None, "finish_reason") == "—"


def test_sampling_progress_reads_as_samples_done_of_total() -> None:
    job = SimpleNamespace(config={"n": 4}, problem_count=10, progress=0.3)
    assert samples_progress(job) == "12 / 40 samples"
    assert samples_progress(SimpleNamespace(config={}, problem_count=0, progress=0.0)) == "—"


@pytest.mark.django_db
def test_new_campaign_form_starts_at_working_defaults_with_range_and_help(client: Client, make_user) -> None:
    client.force_login(make_user("boss", is_staff=True))
    page = client.get(reverse("manage:new")).content.decode()
    values = dict(re.findall(r'<input type="number" name="(\w+)" value="([^"]*)"', page))
    assert values == {"overlap": "1", "qc_rate": "0", "screening_pass_threshold": "70", "lease_minutes": "30",
                      "export_interval_minutes": "60", "quality_threshold": "60", "quality_min_items": "5",
                      "auto_train_max_steps": "24"}
    for name in ("overlap", "qc_rate", "screening_pass_threshold", "lease_minutes", "quality_threshold"):
        tag = re.search(rf'<input type="number" name="{name}"[^>]*>', page).group(0)
        assert 'min="' in tag and 'max="' in tag and f'aria-describedby="id_{name}_helptext"' in tag, tag
    fields = re.findall(r'name="(\w+)"', page.split("data-campaign-form", 1)[1].split("</form>", 1)[0])
    for name in set(fields) - {"csrfmiddlewaretoken"}:
        assert f'id="id_{name}_helptext"' in page, f"{name} has no help line"
    # The checkbox sits inside its label, at the start of the line.
    assert re.search(r'<label for="id_pause_below_threshold"><input type="checkbox"', page)
    response = client.post(reverse("manage:new"), {"name": "Fresh", "slug": "fresh", "mode": "stepwise", **values})
    assert response.status_code == 302, response.content.decode()[:800]


@pytest.mark.django_db(transaction=True)
def test_import_page_shows_each_format_and_its_sample_imports_as_is(client, celery_worker_process,
                                                                    campaign_factory, make_user) -> None:
    campaign = campaign_factory("samples")
    client.force_login(make_user("boss", is_staff=True))
    page = client.get(reverse("manage:imports", args=["samples"])).content.decode()
    for kind in ("problems", "solutions", "prm800k"):
        assert f'data-format="{kind}"' in page
        link = re.search(rf'href="([^"]+)" download="[^"]+" data-sample="{kind}"', page).group(1)
        download = client.get(link)
        assert download.status_code == 200
        assert b"".join(download.streaming_content if download.streaming else [download.content]) == \
            (SAMPLES / f"{kind}.jsonl").read_bytes()

    problems = finished_import(upload(client, "samples", "problems", (SAMPLES / "problems.jsonl").read_bytes()).pk)
    assert problems.status == JobStatus.SUCCEEDED and problems.imported == 2, problems.error
    done = client.get(reverse("manage:import", args=["samples", problems.pk])).content.decode()
    assert "data-next-steps" in done and "What to do next" in done
    assert reverse("manage:members", args=["samples"]) in done.split("data-next-steps", 1)[1]

    solutions = finished_import(upload(client, "samples", "solutions", (SAMPLES / "solutions.jsonl").read_bytes()).pk)
    assert solutions.status == JobStatus.SUCCEEDED and solutions.imported == 2, solutions.rejected
    labels = finished_import(upload(client, "samples", "prm800k", (SAMPLES / "prm800k.jsonl").read_bytes()).pk)
    assert labels.status == JobStatus.SUCCEEDED and labels.imported == 1, labels.rejected
    assert Solution.objects.filter(campaign=campaign).count() == 3
    assert Problem.objects.filter(text__contains="2x + 3 = 11").exists()


@pytest.mark.django_db
def test_dashboard_reads_as_words_and_keeps_imported_labelers_apart(client, campaign_factory, make_user) -> None:
    campaign = campaign_factory("dash")
    member = make_user("ann")
    Membership.objects.create(campaign=campaign, user=member, role=Role.LABELER)
    imported_with_gold, imported_without = make_user("0b9f-imported"), make_user("77aa-imported")
    figure = {"value": 0.5, "items": 4}
    empty = {"value": None, "items": 0}

    def row(user, value):
        return {"labeler_id": user.pk, "username": user.username, "flagged": False, "step_accuracy": value,
                "first_error_exact": value, "first_error_within_one": value, "verdict_accuracy": value}

    CampaignMetrics.objects.create(campaign=campaign, computed_at=timezone.now(), duration_ms=1500, data={
        "labelings": 3, "ratings": 9, "gold_solutions": 1, "gold_overall": row(member, figure),
        "gold_by_labeler": [row(imported_with_gold, figure), row(imported_without, empty), row(member, figure)],
        "inter_annotator": {}, "time": {"per_solution_ms": {"median": 427786, "p90": 900000, "items": 3},
                                        "per_step_ms": {"median": 5400, "p90": 12000, "items": 9}}})
    client.force_login(make_user("boss", is_staff=True))
    page = client.get(reverse("manage:dashboard", args=["dash"])).content.decode()
    assert 'data-finish-reason="found_error">Found an error: 0' in page and ">found_error:" not in page
    assert "median 7 min 8 s" in page and "427786" not in page
    assert 'data-labeler="ann"' in page and 'data-labeler="0b9f-imported" data-imported' in page
    assert 'data-labeler="77aa-imported"' not in page
    assert re.search(r"data-gold-hidden>1 imported labeler without gold items", page)
    gold_table = page.split("data-gold-agreement", 1)[1].split("</table>", 1)[0]
    assert gold_table.index('data-labeler="ann"') < gold_table.index('data-labeler="0b9f-imported"')


@pytest.mark.django_db
def test_dataset_versions_show_distribution_and_what_changed(client, campaign_factory, make_user) -> None:
    campaign = campaign_factory("data")
    researcher = make_user("res")
    Membership.objects.create(campaign=campaign, user=researcher, role=Role.RESEARCHER)
    for number, (labelings, ratings) in enumerate([(10, (2, 3, 5)), (14, (4, 3, 7))], start=1):
        DatasetVersion.objects.create(
            campaign=campaign, number=number, status=DatasetVersion.Status.READY, content_sha256=str(number) * 64,
            folder=f"d{number}", counts={"problems": 5, "solutions": labelings, "assignments": labelings,
                                         "ratings": dict(zip(("negative", "neutral", "positive"), ratings,
                                                             strict=True))})
    client.force_login(researcher)
    page = client.get(reverse("pages:datasets")).content.decode()
    rows = {m.group(1): m.group(2) for m in re.finditer(
        r'<tr data-dataset-version="\d+" data-campaign="data">.*?<td>v(\d+)</td>(.*?)</tr>', page, re.S)}
    assert "first version" in rows["1"] and "−1 20.0%" in rows["1"] and "+1 50.0%" in rows["1"]
    assert "vs v1" in rows["2"]
    changes = re.findall(r'data-change="([^"]+)" class="delta-(up|down)">([^<]+)<', rows["2"])
    assert changes == [("solutions", "up", "+4 solutions"), ("labelings", "up", "+4 labelings"),
                       ("−1 ratings", "up", "+2 −1 ratings"), ("+1 ratings", "up", "+2 +1 ratings")]
    assert "0 ratings" not in rows["2"]  # unchanged counts are not listed


@pytest.mark.django_db
def test_datasets_page_snapshots_a_campaign_from_a_button(client, campaign_factory, make_user) -> None:
    """An empty Datasets page offers the button that makes a version, for each campaign the user researches."""
    campaign, other = campaign_factory("mine"), campaign_factory("theirs")
    researcher = make_user("res")
    Membership.objects.create(campaign=campaign, user=researcher, role=Role.RESEARCHER)
    client.force_login(researcher)
    page = client.get(reverse("pages:datasets")).content.decode()
    assert re.findall(r'data-action="snapshot" data-campaign="([^"]+)"', page) == ["mine"]
    assert "No dataset versions yet: “Snapshot” above makes one." in page
    action = re.search(r'<form method="post" action="([^"]+)" class="inline">', page)
    assert action is not None
    assert f'<input type="hidden" name="next" value="{reverse("pages:datasets")}">' in page
    response = client.post(action.group(1), {"next": reverse("pages:datasets")})
    assert response.status_code == 302 and response.url == reverse("pages:datasets")  # back where the user was
    assert list(DatasetVersion.objects.values_list("campaign__slug", "number")) == [("mine", 1)]
    assert not DatasetVersion.objects.filter(campaign=other).exists()


@pytest.mark.django_db
def test_nav_offers_each_role_only_what_it_may_open(client, campaign_factory, make_user) -> None:
    campaign = campaign_factory("nav")
    users = {role: make_user(f"u-{role}") for role in (Role.LABELER, Role.RESEARCHER, Role.ADMIN)}
    for role, user in users.items():
        Membership.objects.create(campaign=campaign, user=user, role=role)
    expected = {Role.LABELER: set(), Role.RESEARCHER: {"datasets", "models", "dashboard"},
                Role.ADMIN: {"manage", "datasets", "models", "dashboard"}}
    for role, user in users.items():
        browser = Client()
        browser.force_login(user)
        page = browser.get("/").content.decode()
        nav = page.split('class="site-links"', 1)[1].split("</ul>", 1)[0]
        shown = set(re.findall(r'data-nav="(\w[\w-]*)"', nav)) - {"campaigns", "tokens"}
        assert shown == expected[role], role
        for href in re.findall(r'href="([^"]+)"', nav):
            assert browser.get(href).status_code == 200, (role, href)
    # A labeler made researcher sees the new places once the session's nav is refreshed (every few minutes).
    labeler = Client()
    labeler.force_login(users[Role.LABELER])
    Membership.objects.filter(user=users[Role.LABELER]).update(role=Role.RESEARCHER)
    assert 'data-nav="models"' not in labeler.get("/").content.decode()
    session = labeler.session
    session[SESSION_KEY] = {**session[SESSION_KEY], "at": time.time() - 3600}
    session.save()
    assert 'data-nav="models"' in labeler.get("/").content.decode()


def test_favicon_is_served(client: Client) -> None:
    response = client.get("/favicon.ico", follow=True)
    assert response.status_code == 200 and response.redirect_chain
    assert b"<svg" in b"".join(response.streaming_content if response.streaming else [response.content])
