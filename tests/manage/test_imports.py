"""Browser uploads become Celery jobs run by a real worker through the same importers as the commands."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotate.models import ImportJob, Problem, Solution
from steplab.jobs import JobStatus
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def jsonl(rows: list[Any]) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows)


def finished_import(job_id: int, timeout: float = 60) -> ImportJob:
    return wait_for(lambda: (job := ImportJob.objects.get(pk=job_id)).is_finished and job, timeout=timeout,
                    every=0.2, what=f"import job {job_id} to finish")


def upload(client, slug: str, kind: str, content: bytes, **extra: Any) -> ImportJob:
    response = client.post(reverse("manage:imports", args=[slug]),
                           {"kind": kind, "file": SimpleUploadedFile(f"{kind}.jsonl", content), **extra})
    assert response.status_code == 302, response.content.decode()[:500]
    return ImportJob.objects.latest("id")


def test_problems_then_solutions_through_the_worker(client, celery_worker_process, campaign_factory,
                                                    make_user, shared_data: Path) -> None:
    campaign = campaign_factory("uploads")
    client.force_login(make_user("boss", is_staff=True))
    with (shared_data / "math" / "math500.jsonl").open() as lines:
        rows = [json.loads(line) for _, line in zip(range(30), lines, strict=False)]
    job = finished_import(upload(client, "uploads", "problems", jsonl(rows)).pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert (job.lines, job.imported, job.rejected_count, job.progress) == (30, 30, 0, 1.0)
    assert Problem.objects.count() == 30

    samples = [{"problem_id": rows[0]["unique_id"], "solution": "We add.\n\nSo the answer is $\\boxed{5}$."},
               {"problem_id": "test/nowhere/1.json", "solution": "x"},
               {"problem_id": rows[1]["unique_id"]},
               b"{not json"]
    failed = finished_import(upload(client, "uploads", "solutions", jsonl(samples)).pk)
    assert failed.status == JobStatus.FAILED and "nothing was imported" in failed.error
    assert Solution.objects.count() == 0
    by_line = {r["line"]: r for r in failed.rejected}
    assert sorted(by_line) == [2, 3, 4]
    assert by_line[2]["field"] == "problem_id" and "not a known problem" in by_line[2]["message"]
    assert by_line[3]["field"] == "solution"
    assert "not valid JSON" in by_line[4]["message"]
    page = client.get(reverse("manage:import", args=["uploads", failed.pk])).content.decode()
    assert page.count("data-rejected-line=") == 3
    poll = client.get(reverse("manage:import_progress", args=["uploads", failed.pk]), HTTP_HX_REQUEST="true")
    assert poll["HX-Refresh"] == "true" and 'data-import-status="failed"' in poll.content.decode()

    skipped = finished_import(upload(client, "uploads", "solutions", jsonl(samples), skip_invalid="on").pk)
    assert skipped.status == JobStatus.SUCCEEDED and (skipped.imported, skipped.rejected_count) == (1, 3)
    assert Solution.objects.filter(campaign=campaign).count() == 1


def test_prm800k_upload_and_bad_form(client, celery_worker_process, campaign_factory, make_user,
                                     shared_data: Path) -> None:
    campaign_factory("prm")
    client.force_login(make_user("boss", is_staff=True))
    content = (shared_data / "prm800k" / "genuine_rows.jsonl").read_bytes()
    job = finished_import(upload(client, "prm", "prm800k", content).pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.imported == 10 and job.created["solutions"] == 10
    bad = client.post(reverse("manage:imports", args=["prm"]), {"kind": "videos"})
    text = bad.content.decode()
    assert bad.status_code == 400
    assert 'data-field-error="kind"' in text and 'data-field-error="file"' in text


def test_browser_upload_shows_rejected_lines_and_imports_nothing(
        live_server, page, client, celery_worker_process, campaign_factory, make_user, tmp_path: Path) -> None:
    campaign_factory("browser")
    client.force_login(make_user("boss", is_staff=True))
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                               "url": live_server.url}])
    bad = tmp_path / "problems.jsonl"
    bad.write_bytes(jsonl([{"problem": "What is $1+1$?", "answer": "2"}, {"answer": "3"},
                           {"problem": "Fine", "level": "Level x"}, {"problem": "Also fine"}]))
    page.goto(f"{live_server.url}/manage/c/browser/imports/")
    page.select_option("select[name=kind]", "problems")
    page.set_input_files("input[name=file]", str(bad))
    page.click("[data-upload]")
    page.wait_for_selector("[data-import-progress], #import-progress")
    page.wait_for_selector("[data-import-result]", timeout=60_000)  # htmx polls until the job is done
    lines = page.locator("[data-rejected-line]")
    assert lines.count() == 2
    assert lines.nth(0).get_attribute("data-rejected-line") == "2"
    assert "is missing" in lines.nth(0).inner_text() and "problem" in lines.nth(0).inner_text()
    assert "level" in lines.nth(1).inner_text()
    assert page.locator("[data-imported]").inner_text() == "0"
    assert page.locator("[data-import-status]").get_attribute("data-import-status") == "failed"
    assert Problem.objects.count() == 0
