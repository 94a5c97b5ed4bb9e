"""Platform pieces: a task on a real Celery worker, admin pages, deploy checks, compose file, the demo."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib import admin
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from annotate.models import Assignment, AssignmentStatus, AutoTrain, Campaign, Membership, Problem, Solution

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_task_runs_on_a_real_worker(celery_worker_process, campaign_factory, make_user) -> None:
    """The beat's lease reaper, run by the worker, sees this test's rows through the worker's own connection."""
    from annotate.tasks import reap_expired_leases_task

    campaign = campaign_factory("w")
    solution = Solution.objects.create(campaign=campaign, problem=Problem.objects.create(text="worker problem"))
    Assignment.objects.create(solution=solution, labeler=make_user("worker-labeler"), status=AssignmentStatus.LEASED,
                              lease_expires_at=timezone.now() - timedelta(minutes=1))
    result = reap_expired_leases_task.delay()
    assert result.get(timeout=60) == 1


@pytest.mark.django_db
def test_every_admin_page_loads_for_staff(client, django_user_model, shared_data: Path) -> None:
    call_command("import_prm800k", str(shared_data / "prm800k" / "genuine_rows.jsonl"), "--campaign", "adm")
    staff = django_user_model.objects.create_superuser("staff", "s@example.org", "pw-Steplab-1")
    client.force_login(staff)
    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        changelist = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        assert client.get(changelist).status_code == 200, changelist
        if model_admin.has_add_permission(type("R", (), {"user": staff})()):
            assert client.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_add")).status_code == 200
        instance = model.objects.first()
        if instance is not None:
            change = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[instance.pk])
            assert client.get(change).status_code == 200, change


def test_production_settings_pass_check_deploy() -> None:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="steplab.settings_production",
               SECRET_KEY="a-long-random-production-secret-key-0123456789-abcdefghijklmnop",
               ALLOWED_HOSTS="steplab.example.org")
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # only the browser tests need it
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_compose_file_is_valid() -> None:
    compose = shutil.which("docker-compose")
    if compose is None:
        message = "docker-compose (the compose parser) is not installed; ./run test installs it"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    env = dict(os.environ, SECRET_KEY="x")
    result = subprocess.run([compose, "-f", str(ROOT / "docker-compose.yml"), "config"], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for service in ("postgres", "redis", "web", "worker", "beat", "trainer"):
        assert f"  {service}:" in result.stdout
    assert "driver: nvidia" in result.stdout and "- gpu" in result.stdout


@pytest.mark.django_db(transaction=True)
def test_demo_loads_idempotently(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("STEPLAB_DEMO_PASSWORD", "demo-Password-1")
    call_command("demo", "--no-serve")
    out = capsys.readouterr().out
    assert "loaded campaign 'demo'" in out and "account labeler password demo-Password-1" in out
    campaign = Campaign.objects.get(slug="demo")
    solutions, assignments = campaign.solutions.count(), Assignment.objects.filter(solution__campaign=campaign).count()
    assert solutions > 200 and assignments > 100
    assert campaign.solutions.filter(is_quality_control=True, gold_first_error__isnull=False).exists()
    assert campaign.solutions.filter(assignments__isnull=True, is_correct=True).exists()
    # the graded counts printed are the stored ones (not what the loader graded itself: the importer grades)
    correct, wrong = (campaign.solutions.filter(is_correct=verdict).count() for verdict in (True, False))
    assert correct > 0 and wrong > 0
    assert f"graded solutions: {correct} correct, {wrong} wrong, " in out and "graded_correct=" not in out
    assert campaign.auto_train == AutoTrain.OFF  # the demo's people start training; nothing starts on its own
    call_command("demo", "--no-serve")
    assert "already loaded" in capsys.readouterr().out
    assert campaign.solutions.count() == solutions
    roles = dict(Membership.objects.filter(campaign=campaign).values_list("user__username", "role"))
    assert roles == {"labeler": "labeler", "admin": "admin", "researcher": "researcher"}
    from django.contrib.auth import authenticate

    assert authenticate(username="labeler", password="demo-Password-1") is not None
