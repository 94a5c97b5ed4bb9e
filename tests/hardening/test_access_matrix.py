"""Access matrix over every URL of the URL conf (anonymous, labeler in / out of the campaign, researcher,
campaign admin, staff).

The list of URLs is generated from the URL conf: a new endpoint without a rule in RULES fails
`test_every_url_has_a_rule`. Each rule names the method to try and, per role, whether the request must get
through (`+`: any answer that is not a refusal — 2xx, a redirect elsewhere, 400/409 for a refused action) or be
refused (`-`: a redirect to the login page, 401, 403 or 404). Roles, in order:
anonymous, labeler of A, labeler of B only, researcher of A, admin of A, staff.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from annotate.models import Assignment, Campaign, Completion, ImportJob, Problem, Role, Solution, Step
from annotate.permissions import SYSTEM
from annotate.services import accounts, campaigns
from api.services import create_token
from endpoints.services import check_connection, delete_endpoint, register_endpoint
from rewards.jobs.models import TrainingJob
from rewards.jobs.services import (
    comparisons,
    evaluation,
    labeling_rounds,
    llm_judge,
    machine_labeling,
    pools,
    sampling,
    scoring,
    training,
)
from rewards.models import DatasetVersion
from tests.factories import PASSWORD
from webhooks.services import register_webhook

ROLES = ("anonymous", "labeler_in", "labeler_out", "researcher", "admin", "staff")
REFUSED = {401, 403, 404}


@dataclass
class World:
    a: Campaign
    assignment: Assignment
    finished: Assignment
    solution: Solution
    problem: Problem
    version: DatasetVersion
    import_job: ImportJob
    training_job: TrainingJob
    token_id: int
    users: dict[str, Any]
    scoring_job: Any = None
    sampling_job: Any = None
    machine_labeling_job: Any = None
    comparison: Any = None
    endpoint: Any = None  # campaign A's
    staff_endpoint: Any = None  # staff-wide
    llm_judge_job: Any = None


@dataclass(frozen=True)
class Rule:
    access: str  # six characters, one per role
    method: str = "get"
    kwargs: Callable[[World], dict[str, Any]] = lambda w: {}
    data: dict[str, Any] | None = None


def slug(w: World) -> dict[str, Any]:
    return {"slug": w.a.slug}


def campaign_id(w: World) -> dict[str, Any]:
    return {"campaign_id": w.a.pk}


def assignment(w: World) -> dict[str, Any]:
    return {"assignment_id": w.assignment.pk}


def pk(value: Callable[[World], int]) -> Callable[[World], dict[str, Any]]:
    return lambda w: {"pk": value(w)}


PUBLIC, LOGGED_IN = "++++++", "-+++++"
LABELER_IN = "-+----"   # the assignment's own labeler only: not its campaign's admin, not staff
CAMPAIGN_MEMBERS = "-+-++-"  # staff who is not a member uses /manage/ instead
READERS = "-+-+++"      # campaign-scoped lists answer members (labelers get their own view)
RESEARCH = "---+++"     # researchers, campaign admins, staff
MANAGERS = "----++"     # campaign admins and staff
LEASERS = "-+--+-"      # members who label: labelers and campaign admins (researchers only read)
STAFF = "-----+"

RULES: dict[str, Rule] = {
    # auth
    "login": Rule(PUBLIC),
    "logout": Rule(LOGGED_IN, method="post"),  # anonymous is sent to the login page
    "password_change": Rule(LOGGED_IN),
    "password_change_done": Rule(LOGGED_IN),
    # labeler pages
    "annotate:home": Rule(LOGGED_IN),
    "annotate:healthz": Rule(PUBLIC),
    "annotate:invitations": Rule(LOGGED_IN),
    "annotate:campaign": Rule(CAMPAIGN_MEMBERS, kwargs=slug),
    "annotate:start": Rule(LEASERS, method="post", kwargs=slug),
    "annotate:workspace": Rule(LABELER_IN, kwargs=assignment),
    "annotate:rate": Rule(LABELER_IN, method="post", kwargs=assignment, data={"step_index": 0, "rating": 1}),
    "annotate:flag": Rule(LABELER_IN, method="post", kwargs=assignment, data={"step_index": 0, "flagged": "true"}),
    "annotate:bad_split": Rule(LABELER_IN, method="post", kwargs=assignment,
                               data={"step_index": 0, "reported": "true"}),
    "annotate:decide": Rule(LABELER_IN, method="post", kwargs=assignment,
                            data={"step_index": 0, "chosen_completion": 0}),
    "annotate:finish": Rule(LABELER_IN, method="post", kwargs=assignment,
                            data={"reason": "give_up", "reason_text": "access test"}),
    "annotate:next": Rule(LABELER_IN, method="post", kwargs=assignment),
    "annotate:heartbeat": Rule(LABELER_IN, method="post", kwargs=assignment),
    "annotate:resume": Rule(LABELER_IN, method="post", kwargs=assignment),
    "annotate:outcome": Rule(LABELER_IN, method="post", kwargs=assignment, data={"correct": "true"}),
    # campaign admin
    "manage:index": Rule(MANAGERS),
    "manage:new": Rule(MANAGERS),  # staff, or an admin of some campaign (who becomes admin of the new one)
    "manage:dashboard": Rule(MANAGERS, kwargs=slug),
    "manage:edit": Rule(MANAGERS, kwargs=slug),
    "manage:archive": Rule(MANAGERS, method="post", kwargs=slug),
    "manage:metrics_refresh": Rule(MANAGERS, method="post", kwargs=slug),
    "manage:members": Rule(MANAGERS, kwargs=slug),
    "manage:labeler": Rule(MANAGERS, kwargs=lambda w: {"slug": w.a.slug, "user_id": w.users["labeler_in"].pk}),
    "manage:member_state": Rule(MANAGERS, method="post", data={"action": "pause"},
                                kwargs=lambda w: {"slug": w.a.slug, "user_id": w.users["labeler_in"].pk}),
    "manage:imports": Rule(MANAGERS, kwargs=slug),
    "manage:import": Rule(MANAGERS, kwargs=lambda w: {"slug": w.a.slug, "job_id": w.import_job.pk}),
    "manage:import_progress": Rule(MANAGERS, kwargs=lambda w: {"slug": w.a.slug, "job_id": w.import_job.pk}),
    "manage:adjudication": Rule(MANAGERS, kwargs=slug),
    "manage:review": Rule(MANAGERS, kwargs=lambda w: {"slug": w.a.slug, "solution_id": w.solution.pk}),
    "manage:split_reports": Rule(MANAGERS, kwargs=slug),
    "webhooks:campaign": Rule(MANAGERS, kwargs=slug),
    "endpoints:campaign": Rule(MANAGERS, kwargs=slug),
    "endpoints:staff": Rule(STAFF),  # the staff-wide endpoints
    "manage:resplit": Rule(MANAGERS, kwargs=lambda w: {"slug": w.a.slug, "solution_id": w.solution.pk}),
    # REST API (session auth here; tokens are covered in tests/api)
    "api:schema": Rule(PUBLIC),  # the API's contract is public; every endpoint it describes checks access
    "api:docs": Rule(PUBLIC),
    "api:api-root": Rule(LOGGED_IN),
    "api:campaign-list": Rule(LOGGED_IN),
    "api:campaign-detail": Rule(READERS, kwargs=pk(lambda w: w.a.pk)),
    "api:campaign-import-solutions": Rule(MANAGERS, method="post", kwargs=pk(lambda w: w.a.pk)),
    "api:campaign-lease": Rule(LEASERS, method="post", kwargs=pk(lambda w: w.a.pk)),
    "api:campaign-metrics": Rule(RESEARCH, kwargs=pk(lambda w: w.a.pk)),
    "api:problem-list": Rule(LOGGED_IN),
    "api:problem-detail": Rule(RESEARCH, kwargs=pk(lambda w: w.problem.pk)),
    "api:solution-list": Rule(LOGGED_IN),
    "api:solution-detail": Rule(RESEARCH, kwargs=pk(lambda w: w.solution.pk)),
    "api:label-list": Rule(LOGGED_IN),
    "api:label-detail": Rule(RESEARCH, kwargs=pk(lambda w: w.finished.pk)),
    "api:assignment-detail": Rule(LABELER_IN, kwargs=pk(lambda w: w.assignment.pk)),
    "api:assignment-rate": Rule(LABELER_IN, method="post", kwargs=pk(lambda w: w.assignment.pk),
                                data={"step_index": 0, "rating": 1}),
    "api:assignment-flag": Rule(LABELER_IN, method="post", kwargs=pk(lambda w: w.assignment.pk),
                                data={"step_index": 0, "flagged": True}),
    "api:assignment-bad-split": Rule(LABELER_IN, method="post", kwargs=pk(lambda w: w.assignment.pk),
                                     data={"step_index": 0}),
    "api:assignment-labeling": Rule(LABELER_IN, method="post", kwargs=pk(lambda w: w.assignment.pk),
                                    data={"ratings": [{"step_index": 0, "rating": 1}], "client_key": "matrix"}),
    # the bulk form names its assignments in the body: anyone signed in may post, each item is checked as above
    "api:labeling-list": Rule(LOGGED_IN, method="post", data={"labelings": []}),
    "api:assignment-decide": Rule(LABELER_IN, method="post", kwargs=pk(lambda w: w.assignment.pk),
                                  data={"step_index": 0, "chosen_completion": 0}),
    "api:assignment-finish": Rule(LABELER_IN, method="post", kwargs=pk(lambda w: w.assignment.pk),
                                  data={"reason": "give_up", "text": "access test"}),
    "api:dataset-list": Rule(LOGGED_IN),
    "api:dataset-detail": Rule(RESEARCH, kwargs=pk(lambda w: w.version.pk)),
    "api:dataset-download": Rule(RESEARCH, kwargs=lambda w: {"pk": w.version.pk, "fmt": "prm800k"}),
    # the reward-model API under /api/ (campaigns by id); the same views answer at /models/api/ (jobs:api_*)
    "api:generations": Rule(RESEARCH, kwargs=campaign_id),
    "api:labeling-rounds": Rule(RESEARCH, kwargs=campaign_id),
    "api:sampling": Rule(RESEARCH, kwargs=campaign_id),
    "api:machine-labeling": Rule(RESEARCH, kwargs=campaign_id),
    "api:jobs": Rule(RESEARCH),
    "api:job": Rule(RESEARCH, kwargs=pk(lambda w: w.training_job.pk)),
    "api:job-cancel": Rule(RESEARCH, method="post", kwargs=pk(lambda w: w.training_job.pk)),
    "api:snapshot": Rule(RESEARCH, method="post", kwargs=campaign_id),
    "api:pools": Rule(RESEARCH, kwargs=campaign_id),
    "api:scoring": Rule(RESEARCH, kwargs=campaign_id),
    "api:evaluations": Rule(RESEARCH, method="post", kwargs=campaign_id),
    "api:comparisons": Rule(RESEARCH, kwargs=campaign_id),
    "api:scoring-job": Rule(RESEARCH, kwargs=pk(lambda w: w.scoring_job.pk)),
    "api:scoring-job-cancel": Rule(RESEARCH, method="post", kwargs=pk(lambda w: w.scoring_job.pk)),
    "api:comparison": Rule(RESEARCH, kwargs=pk(lambda w: w.comparison.pk)),
    "api:comparison-cancel": Rule(RESEARCH, method="post", kwargs=pk(lambda w: w.comparison.pk)),
    # endpoints: the list answers each user with those they manage; one of A's is its managers' only
    "api:endpoint-list": Rule(LOGGED_IN),
    "api:endpoint-detail": Rule(MANAGERS, kwargs=pk(lambda w: w.endpoint.pk)),
    # the world's endpoint is on an address the policy refuses by then: the test answers without the network
    "api:endpoint-test-connection": Rule(MANAGERS, method="post", kwargs=pk(lambda w: w.endpoint.pk)),
    # researcher pages (HTML, session login)
    "pages:tokens": Rule(LOGGED_IN),
    "pages:token-revoke": Rule("---+--", method="post", kwargs=lambda w: {"token_id": w.token_id}),
    "pages:datasets": Rule(LOGGED_IN),
    # reward models, dashboard, generations
    "jobs:index": Rule(RESEARCH),
    "jobs:job_new": Rule(RESEARCH),
    "jobs:job": Rule(RESEARCH, kwargs=pk(lambda w: w.training_job.pk)),
    "jobs:job_progress": Rule(RESEARCH, kwargs=pk(lambda w: w.training_job.pk)),
    "jobs:job_cancel": Rule(RESEARCH, method="post", kwargs=pk(lambda w: w.training_job.pk)),
    "jobs:dashboard": Rule(RESEARCH),
    "jobs:figure": Rule(RESEARCH, kwargs=lambda w: {"name": "best-of-n", "fmt": "json"}),
    "jobs:campaign_dashboard": Rule(RESEARCH, kwargs=slug),
    "jobs:campaign_figure": Rule(RESEARCH, kwargs=lambda w: {"slug": w.a.slug, "name": "generations", "fmt": "csv"}),
    "jobs:labeling_round_start": Rule(MANAGERS, method="post", kwargs=slug),
    "jobs:generation_start": Rule(MANAGERS, method="post", kwargs=slug),  # its deprecated alias
    "jobs:sampling_start": Rule(MANAGERS, method="post", kwargs=slug),
    "jobs:machine_labels_start": Rule(MANAGERS, method="post", kwargs=slug),
    "jobs:api_generations": Rule(RESEARCH, kwargs=slug),
    "jobs:api_labeling_rounds": Rule(RESEARCH, kwargs=slug),
    "jobs:api_sampling": Rule(RESEARCH, kwargs=slug),
    "jobs:api_machine_labeling": Rule(RESEARCH, kwargs=slug),
    "jobs:api_jobs": Rule(RESEARCH),
    "jobs:api_job": Rule(RESEARCH, kwargs=pk(lambda w: w.training_job.pk)),
    "jobs:api_job_cancel": Rule(RESEARCH, method="post", kwargs=pk(lambda w: w.training_job.pk)),
    # the loop, step by step, and the one-click comparison
    "jobs:compare_start": Rule(RESEARCH, method="post", kwargs=slug),
    "jobs:snapshot": Rule(RESEARCH, method="post", kwargs=slug),
    "jobs:pool_upload": Rule(RESEARCH, kwargs=slug),
    "jobs:score_start": Rule(RESEARCH, method="post", kwargs=slug),
    "jobs:evaluate_start": Rule(RESEARCH, method="post", kwargs=slug),
    "jobs:comparison_progress": Rule(RESEARCH, kwargs=pk(lambda w: w.comparison.pk)),
    "jobs:comparison_cancel": Rule(RESEARCH, method="post", kwargs=pk(lambda w: w.comparison.pk)),
    "jobs:scoring_job": Rule(RESEARCH, kwargs=pk(lambda w: w.scoring_job.pk)),
    "jobs:scoring_job_progress": Rule(RESEARCH, kwargs=pk(lambda w: w.scoring_job.pk)),
    "jobs:scoring_job_cancel": Rule(RESEARCH, method="post", kwargs=pk(lambda w: w.scoring_job.pk)),
    "jobs:sampling_job": Rule(RESEARCH, kwargs=pk(lambda w: w.sampling_job.pk)),
    "jobs:sampling_job_progress": Rule(RESEARCH, kwargs=pk(lambda w: w.sampling_job.pk)),
    "jobs:sampling_job_cancel": Rule(RESEARCH, method="post", kwargs=pk(lambda w: w.sampling_job.pk)),
    "jobs:machine-labels_job": Rule(RESEARCH, kwargs=pk(lambda w: w.machine_labeling_job.pk)),
    "jobs:machine-labels_job_progress": Rule(RESEARCH, kwargs=pk(lambda w: w.machine_labeling_job.pk)),
    "jobs:machine-labels_job_cancel": Rule(RESEARCH, method="post",
                                           kwargs=pk(lambda w: w.machine_labeling_job.pk)),
    # resuming a stopped job is for those who start such jobs (the world's jobs are queued: 409 past the check)
    "jobs:sampling_job_resume": Rule(MANAGERS, method="post", kwargs=pk(lambda w: w.sampling_job.pk)),
    "jobs:machine-labels_job_resume": Rule(MANAGERS, method="post", kwargs=pk(lambda w: w.machine_labeling_job.pk)),
    "api:sampling-resume": Rule(MANAGERS, method="post", kwargs=pk(lambda w: w.sampling_job.pk)),
    "api:machine-labeling-resume": Rule(MANAGERS, method="post", kwargs=pk(lambda w: w.machine_labeling_job.pk)),
    "jobs:api_sampling_resume": Rule(MANAGERS, method="post", kwargs=pk(lambda w: w.sampling_job.pk)),
    "jobs:api_machine_labeling_resume": Rule(MANAGERS, method="post",
                                             kwargs=pk(lambda w: w.machine_labeling_job.pk)),
    # the LLM judge: researchers read its page and its jobs; starting and resuming are machine labeling's managers'
    "jobs:llm_judge_start": Rule(MANAGERS, method="post", kwargs=slug, data={"solutions": 0}),
    "jobs:llm_judge_resume": Rule(MANAGERS, method="post",
                                  kwargs=lambda w: {"slug": w.a.slug, "pk": w.llm_judge_job.pk}),
    "jobs:llm-judge_job": Rule(RESEARCH, kwargs=pk(lambda w: w.llm_judge_job.pk)),
    "jobs:llm-judge_job_progress": Rule(RESEARCH, kwargs=pk(lambda w: w.llm_judge_job.pk)),
    "jobs:llm-judge_job_cancel": Rule(RESEARCH, method="post", kwargs=pk(lambda w: w.llm_judge_job.pk)),
    "jobs:api_snapshot": Rule(RESEARCH, method="post", kwargs=slug),
    "jobs:api_pools": Rule(RESEARCH, kwargs=slug),
    "jobs:api_scoring": Rule(RESEARCH, kwargs=slug),
    "jobs:api_evaluations": Rule(RESEARCH, method="post", kwargs=slug),
    "jobs:api_comparisons": Rule(RESEARCH, kwargs=slug),
    "jobs:api_scoring_job": Rule(RESEARCH, kwargs=pk(lambda w: w.scoring_job.pk)),
    "jobs:api_scoring_job_cancel": Rule(RESEARCH, method="post", kwargs=pk(lambda w: w.scoring_job.pk)),
    "jobs:api_comparison": Rule(RESEARCH, kwargs=pk(lambda w: w.comparison.pk)),
    "jobs:api_comparison_cancel": Rule(RESEARCH, method="post", kwargs=pk(lambda w: w.comparison.pk)),
}


def _url_names() -> set[str]:
    names: set[str] = set()

    def walk(patterns: list[Any], namespace: str | None) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if pattern.namespace == "admin":
                    continue  # Django's admin: staff only by construction, its pages are loaded in tests/foundation
                inner = ":".join(filter(None, [namespace, pattern.namespace])) if pattern.namespace else namespace
                walk(pattern.url_patterns, inner)
            elif isinstance(pattern, URLPattern) and pattern.name:
                names.add(f"{namespace}:{pattern.name}" if namespace else pattern.name)

    walk(get_resolver().url_patterns, None)
    return names


def test_every_url_has_a_rule() -> None:
    names = _url_names()
    assert sorted(names - RULES.keys()) == [], "URLs without an access rule"
    assert sorted(RULES.keys() - names) == [], "rules for URLs that no longer exist"


@pytest.fixture
def world(db, tmp_path, settings, campaign_factory, personas) -> World:
    settings.MEDIA_ROOT = str(tmp_path)
    settings.STEPLAB_JOBS_ROOT = tmp_path / "jobs"  # a sampling job started by the matrix writes its files here
    a = campaign_factory("a", name="A")
    people = personas(a, elsewhere=campaign_factory("b", name="B"), outsider_role=Role.LABELER,
                      membership={"passed_screening": True}, superuser=True)
    users = {"labeler_in": people.labeler, "labeler_out": people.outsider, "researcher": people.researcher,
             "admin": people.owner, "staff": people.staff}
    problem = Problem.objects.create(campaign=a, text="What is $1+1$?", answer="2")
    solution = Solution.objects.create(campaign=a, problem=problem)
    for index in range(2):
        Completion.objects.create(step=Step.objects.create(solution=solution, index=index), index=0, text=f"s{index}")
    from annotate.services.leases import lease_next_solution

    leased = lease_next_solution(a, users["labeler_in"]).assignment
    assert leased is not None
    # A finished labeling for the label endpoints; the open lease above stays the labeler's.
    done = Solution.objects.create(campaign=a, problem=problem)
    finished = Assignment.objects.create(solution=done, labeler=users["labeler_in"], status="submitted",
                                         finish_reason="give_up", finish_reason_text="test")
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "prm800k.jsonl").write_text("{}\n")
    version = DatasetVersion.objects.create(campaign=a, number=1, status=DatasetVersion.Status.READY,
                                            content_sha256="0" * 64, folder="datasets",
                                            files={"prm800k": {"name": "datasets/prm800k.jsonl",
                                                               "sha256": "0" * 64, "bytes": 3, "rows": 1}})
    import_job = ImportJob.objects.create(campaign=a, kind="problems", file="imports/x.jsonl", original_name="x.jsonl")
    training_job = TrainingJob.objects.create(kind="prm", campaign=a, dataset_path="/nonexistent.jsonl")
    token, _ = create_token(users["researcher"], name="t", scope="read")
    from rewards.jobs.models import (
        CandidatePool,
        ComparisonRun,
        MachineLabelingJob,
        RewardModel,
        SamplingJob,
        ScoringJob,
    )

    pool = CandidatePool.objects.create(name="a-pool", campaign=a)
    reward_model = RewardModel.objects.create(job=training_job, kind="prm", campaign=a, name="prm", location="/none",
                                              base_model="default")
    # Registered while the operator allows the loopback address, which the policy then refuses: testing the
    # connection answers the refusal and never opens a socket.
    settings.STEPLAB_ENDPOINT_ALLOW = ["127.0.0.1"]
    endpoint = register_endpoint(SYSTEM, campaign=a, name="a-endpoint", base_url="http://127.0.0.1:9/v1", model="m")
    staff_endpoint = register_endpoint(SYSTEM, campaign=None, name="wide", base_url="http://127.0.0.1:9/v1",
                                       model="m")
    settings.STEPLAB_ENDPOINT_ALLOW = []
    judge_job = llm_judge.start_llm_judge_job(campaign=a, endpoint=endpoint, user=SYSTEM, limit=1)
    return World(a=a, assignment=leased, finished=finished, solution=solution, problem=problem, version=version,
                 import_job=import_job, training_job=training_job, token_id=token.pk, users=users,
                 scoring_job=ScoringJob.objects.create(reward_model=reward_model, pool=pool),
                 sampling_job=SamplingJob.objects.create(campaign=a),
                 machine_labeling_job=MachineLabelingJob.objects.create(campaign=a, method="mc"),
                 comparison=ComparisonRun.objects.create(campaign=a, max_steps=1),
                 endpoint=endpoint, staff_endpoint=staff_endpoint, llm_judge_job=judge_job)


def _refused(response: Any, role: str) -> bool:
    if response.status_code in REFUSED:
        return True
    return role == "anonymous" and response.status_code == 302 and "/accounts/login/" in response.get("Location", "")


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(RULES))
def test_access(world: World, name: str) -> None:
    rule = RULES[name]
    url = reverse(name, kwargs=rule.kwargs(world))
    wrong = []
    for role, expected in zip(ROLES, rule.access, strict=True):
        client = Client()
        if role != "anonymous":
            client.force_login(world.users[role])
        response = getattr(client, rule.method)(url, rule.data or {})
        assert response.status_code < 500, f"{name} as {role}: {response.status_code}"
        got = "-" if _refused(response, role) else "+"
        if got != expected:
            wrong.append(f"{role}: expected {'allowed' if expected == '+' else 'refused'}, got {response.status_code}")
    assert not wrong, f"{rule.method.upper()} {url}: " + "; ".join(wrong)


OFF_SITE = ("https://evil.example/", "//evil.example/", "/\\evil.example/", "http://testserver.evil.example/")


@pytest.mark.django_db
def test_no_next_leads_off_site(world: World) -> None:
    """Every URL, as its most privileged allowed role, with a hostile ``next`` in the query and the form: any
    redirect stays on this site. (One world for all URLs: what a POST changes does not matter here.)"""
    wrong = []
    for name, rule in sorted(RULES.items()):
        role = ROLES[rule.access.rindex("+")]
        url = reverse(name, kwargs=rule.kwargs(world))
        client = Client()
        if role != "anonymous":
            client.force_login(world.users[role])
        for target in OFF_SITE:
            data = {**(rule.data or {}), "next": target}
            if rule.method == "get":
                response = client.get(url, data)
            else:
                response = getattr(client, rule.method)(f"{url}?next={quote(target)}", data)
            location = urlsplit(response.get("Location", ""))
            if location.netloc not in ("", "testserver") or "\\" in location.path:
                wrong.append(f"{rule.method.upper()} {url} as {role} with next={target}: {response.status_code} -> "
                             f"{response.get('Location')}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.django_db
def test_member_state_follows_a_local_next(world: World) -> None:
    client = Client()
    client.force_login(world.users["admin"])
    url = reverse("manage:member_state", kwargs={"slug": world.a.slug, "user_id": world.users["labeler_in"].pk})
    local = reverse("manage:labeler", kwargs={"slug": world.a.slug, "user_id": world.users["labeler_in"].pk})
    assert client.post(url, {"action": "pause", "next": local})["Location"] == local
    assert client.post(url, {"action": "unpause", "next": "https://evil.example/"})["Location"] == reverse(
        "manage:members", args=[world.a.slug])


@pytest.mark.django_db
def test_login_and_logout_ignore_an_off_site_next(world: World) -> None:
    client = Client()
    for target in OFF_SITE:
        response = client.post(f"/accounts/login/?next={quote(target)}",
                               {"username": world.users["labeler_in"].username, "password": PASSWORD, "next": target})
        assert response.status_code == 302 and urlsplit(response["Location"]).netloc == "", target
        response = client.post(f"/accounts/logout/?next={quote(target)}", {"next": target})
        assert urlsplit(response.get("Location", "")).netloc == "", target


@pytest.mark.django_db
def test_numbers_past_the_database_integers_are_a_400_naming_the_field(world: World) -> None:
    """The htmx labeling posts and the generation form: a 400 that names the field, never a database error."""
    client = Client()
    client.force_login(world.users["labeler_in"])
    huge = "99999999999999999999999"
    for name, data, field in (
            ("annotate:rate", {"step_index": huge, "rating": 1}, "step_index"),
            ("annotate:rate", {"step_index": 0, "rating": 1, "completion_index": huge}, "completion_index"),
            ("annotate:flag", {"step_index": huge, "flagged": "true"}, "step_index"),
            ("annotate:decide", {"step_index": huge, "chosen_completion": 0}, "step_index"),
            ("annotate:decide", {"step_index": 0, "chosen_completion": huge}, "chosen_completion")):
        url = reverse(name, kwargs={"assignment_id": world.assignment.pk})
        for headers in ({"HTTP_HX_REQUEST": "true"}, {}):
            response = client.post(url, data, **headers)
            assert response.status_code == 400 and field in response.content.decode(), (name, data, headers)
    admin = Client()
    admin.force_login(world.users["admin"])
    response = admin.post(reverse("jobs:labeling_round_start", kwargs={"slug": world.a.slug}),
                          {"strategy": "random", "batch_size": "9" * 30, "config": ""})
    assert response.status_code == 400 and "batch_size" in response.content.decode()


@pytest.mark.django_db
def test_pools_and_evaluations_stay_in_their_campaign(world: World) -> None:
    """A researcher of B, on B's own URLs, naming A's pool, models and scoring: refused like a missing object
    (400 naming the field); a pool named like one of A's is B's own, and A's pool lists do not show it."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from rewards.jobs.models import CandidatePool, JobStatus, ScoringJob
    from tests.factories import MembershipFactory, UserFactory

    b = Campaign.objects.get(slug="b")
    researcher_b = UserFactory(username="researcher_b")
    MembershipFactory(campaign=b, user=researcher_b, role=Role.RESEARCHER)
    ScoringJob.objects.filter(pk=world.scoring_job.pk).update(status=JobStatus.SUCCEEDED)
    a_pool, a_model = world.scoring_job.pool, world.scoring_job.reward_model
    client = Client()
    client.force_login(researcher_b)
    line = b'{"problem": "What is 1+1?", "solution": "It is 2.", "answer": "2", "ground_truth": "2"}\n'
    cases: list[tuple[str, str, dict[str, Any], str, Any]] = [
        ("post", f"/api/campaigns/{b.pk}/evaluations/", {"prm_scoring": world.scoring_job.pk}, "json", 400),
        ("post", f"/api/campaigns/{b.pk}/evaluations/", {"orm_scoring": world.scoring_job.pk}, "json", 400),
        ("post", f"/api/campaigns/{b.pk}/scoring/", {"pool": a_pool.pk, "reward_models": [a_model.pk]}, "json", 400),
        ("post", f"/models/dashboard/{b.slug}/evaluate/", {"prm_scoring": world.scoring_job.pk}, "form", 400),
        ("post", f"/models/dashboard/{b.slug}/score/", {"pool": a_pool.pk, "models": [a_model.pk]}, "form", 400),
        ("get", f"/api/campaigns/{world.a.pk}/pools/", {}, "form", 404),
        ("post", f"/api/campaigns/{world.a.pk}/evaluations/", {"prm_scoring": world.scoring_job.pk}, "json", 404),
        ("post", f"/api/campaigns/{b.pk}/pools/",
         {"name": a_pool.name, "file": SimpleUploadedFile("p.jsonl", line)}, "form", 201),
    ]
    wrong = []
    for method, url, data, kind, expected in cases:
        if kind == "json":
            response = getattr(client, method)(url, data, content_type="application/json")
        else:
            response = getattr(client, method)(url, data)
        if response.status_code != expected:
            wrong.append(f"{method.upper()} {url} {data}: expected {expected}, got {response.status_code}")
        elif url.startswith("/models/") and "no scoring job" not in response.content.decode() and \
                "no candidate pool" not in response.content.decode():
            wrong.append(f"{method.upper()} {url} {data}: the page does not say the object is missing")
    assert not wrong, "\n".join(wrong)
    assert not world.a.evaluation_runs.exists() and not ScoringJob.objects.filter(pool__campaign=b).exists()
    assert CandidatePool.objects.filter(name=a_pool.name).values_list("campaign__slug", flat=True).count() == 2


# --- the same rules for services called outside views (commands, tasks, other services) ---------------------------
# Each guarded service checks its predicate itself (annotate.permissions.require), so a command or a task that acts
# for a user is held to the page's rule; ``SYSTEM`` (a command, a task) may do anything, and ``None`` (a caller that
# forgot the user) nothing. The inputs are wrong on purpose after the check: an allowed caller gets the input error,
# not a job.

def _upload(name: str = "x.jsonl") -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, b"not json\n")


def _connected(answer: tuple[bool, str]) -> None:
    """Past the check, the world's endpoint is refused by the address policy: that refusal, as an error."""
    ok, message = answer
    assert not ok and "STEPLAB_ENDPOINT_ALLOW" in message, message
    raise ConnectionRefusedError(message)


def _unsaved(campaign: Campaign | None) -> Any:
    from endpoints.models import Endpoint

    return Endpoint(campaign=campaign, name="unsaved", base_url="http://127.0.0.1:9/v1", model="m")


SERVICES: dict[str, tuple[str, Callable[[World, Any], object]]] = {  # name: (who may, as in ROLES[1:], call)
    "start_labeling_round": ("---++", lambda w, user: labeling_rounds.start_labeling_round(
        w.a, strategy="random", batch_size=0, user=user)),
    "start_sampling_job": ("---++", lambda w, user: sampling.start_sampling_job(w.a, config={"bogus": 1}, user=user)),
    "start_machine_labeling_job": ("---++", lambda w, user: machine_labeling.start_machine_labeling_job(
        campaign=w.a, method="bogus", user=user)),
    "start_training_job": ("--+++", lambda w, user: training.start_training_job(
        training.TrainingRequest(kind="bogus", dataset_version=w.version), user=user)),
    "start_scoring_job": ("--+++", lambda w, user: scoring.start_scoring_job(
        w.scoring_job.reward_model, pool=w.scoring_job.pool, backend="bogus", user=user)),
    "evaluate_scorings": ("--+++", lambda w, user: evaluation.evaluate_scorings(
        w.a, prm_scoring=None, orm_scoring=None, user=user)),
    "start_comparison": ("--+++", lambda w, user: comparisons.start_comparison(w.a, max_steps=0, user=user)),
    "import_uploaded_pool": ("--+++", lambda w, user: pools.import_uploaded_pool(
        _upload(), campaign=w.a, split_rule="bogus", user=user)),
    "create_import_job": ("---++", lambda w, user: campaigns.create_import_job(
        w.a, kind="bogus", upload=_upload(), user=user)),
    "import_solutions_now": ("---++", lambda w, user: campaigns.import_solutions_now(
        w.a, path=Path("/nonexistent/solutions.jsonl"), user=user)),
    "register_webhook": ("---++", lambda w, user: register_webhook(campaign=w.a, url="ftp://x", events=[], user=user)),
    "create_member_account": ("---++", lambda w, user: accounts.create_member_account(
        w.a, username="not a valid name", role="labeler", created_by=user)),
    "register_endpoint": ("---++", lambda w, user: register_endpoint(
        user, campaign=w.a, name="", base_url="http://127.0.0.1:9/v1", model="m")),
    "register_endpoint (staff-wide)": ("----+", lambda w, user: register_endpoint(
        user, campaign=None, name="", base_url="http://127.0.0.1:9/v1", model="m")),
    # an unsaved endpoint: Django refuses to delete it, so an allowed caller removes nothing
    "delete_endpoint": ("---++", lambda w, user: delete_endpoint(user, endpoint=_unsaved(w.a))),
    "delete_endpoint (staff-wide)": ("----+", lambda w, user: delete_endpoint(user, endpoint=_unsaved(None))),
    "check_connection": ("---++", lambda w, user: _connected(check_connection(user, endpoint=w.endpoint))),
    "check_connection (staff-wide)": ("----+", lambda w, user: _connected(check_connection(
        user, endpoint=w.staff_endpoint))),
    # the judge job is queued: an allowed caller's resume is refused as having nothing to resume
    "start_llm_judge_job": ("---++", lambda w, user: llm_judge.start_llm_judge_job(
        campaign=w.a, endpoint=w.endpoint, user=user, limit=0)),
    "resume_llm_judge_job": ("---++", lambda w, user: llm_judge.resume_llm_judge_job(w.llm_judge_job, user=user)),
    "resume_sampling_job": ("---++", lambda w, user: sampling.resume_sampling_job(w.sampling_job, user=user)),
    "resume_machine_labeling_job": ("---++", lambda w, user: machine_labeling.resume_machine_labeling_job(
        w.machine_labeling_job, user=user)),
    "sample_for_labeling_round": ("---++", lambda w, user: labeling_rounds.sample_for_labeling_round(
        w.a, endpoint=w.endpoint, strategy="random", batch_size=0, user=user)),
}


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(SERVICES))
def test_services_hold_callers_outside_views_to_the_same_rule(world: World, name: str) -> None:
    from annotate.permissions import NotAllowed

    access, call = SERVICES[name]
    wrong = []
    for role, expected in zip(ROLES[1:], access, strict=True):
        try:
            call(world, world.users[role])
        except NotAllowed:
            got = "-"
        except Exception:  # noqa: BLE001 - past the check: the deliberately wrong input is refused
            got = "+"
        else:
            got = "+"
        if got != expected:
            wrong.append(f"{role}: expected {'allowed' if expected == '+' else 'refused'}")
    with pytest.raises(Exception) as system:  # the system (a command, a task) passes the check
        call(world, SYSTEM)
    assert not isinstance(system.value, NotAllowed)
    with pytest.raises(NotAllowed):  # a forgotten user is refused, never taken for the system
        call(world, None)
    assert not wrong, f"{name}: " + "; ".join(wrong)


# --- labeling services, as each persona -------------------------------------------------------------------------
# Leasing, the workspace read and every rating write check their rules with ``permissions.require`` and refuse
# with the labeling ``NotAllowed`` (a LabelingError: pages and the API answer it as before). The calls name
# ``world.assignment`` (the labeler's open lease) with a step past the end, so an allowed caller meets the input
# error, never a write.

@dataclass(frozen=True)
class LabelingCall:
    access: str  # six characters, as ROLES (anonymous included)
    call: Callable[[World, Any], object]
    refused: str  # the refusal's words for the signed-in roles it refuses
    anonymous: str = "This is not your assignment."


def _labeling_calls() -> dict[str, LabelingCall]:
    from annotate.services import labeling, leases, whole_labeling
    from annotate.workspace import load_workspace

    mine = "This is not your assignment."
    return {
        "lease_next_solution": LabelingCall(LEASERS, lambda w, user: leases.lease_next_solution(w.a, user),
                                            "You are not a labeler in this campaign.", "Log in to label."),
        "heartbeat": LabelingCall(LABELER_IN, lambda w, user: leases.heartbeat(w.assignment.pk, user), mine),
        "resume_expired_lease": LabelingCall(LABELER_IN, lambda w, user: leases.resume_expired_lease(
            w.assignment.pk, user), mine),
        "finish_and_lease_next": LabelingCall(LABELER_IN, lambda w, user: leases.finish_and_lease_next(
            w.assignment.pk, user), mine),
        "load_workspace": LabelingCall(LABELER_IN, lambda w, user: load_workspace(w.assignment.pk, user), mine),
        "record_rating": LabelingCall(LABELER_IN, lambda w, user: labeling.record_rating(
            w.assignment.pk, user=user, step_index=99, rating=1), mine),
        "flag_step": LabelingCall(LABELER_IN, lambda w, user: labeling.flag_step(
            w.assignment.pk, user=user, step_index=99, flagged=True), mine),
        "decide_step": LabelingCall(LABELER_IN, lambda w, user: labeling.decide_step(
            w.assignment.pk, user=user, step_index=99, chosen_completion=0), mine),
        "finish_assignment": LabelingCall(LABELER_IN, lambda w, user: labeling.finish_assignment(
            w.assignment.pk, user=user, reason="solution"), mine),
        "submit_assignment": LabelingCall(LABELER_IN, lambda w, user: labeling.submit_assignment(
            w.assignment.pk, user=user), mine),
        "apply_labeling": LabelingCall(LABELER_IN, lambda w, user: whole_labeling.apply_labeling(
            whole_labeling.LabelingInput(assignment_id=w.assignment.pk, client_key=f"matrix-{user.pk}",
                                         ratings=[whole_labeling.StepLabel(step_index=99, rating=1)]), user),
            mine, "Log in to label."),
    }


LABELING_CALLS = sorted(_labeling_calls())


@pytest.mark.django_db
@pytest.mark.parametrize("name", LABELING_CALLS)
def test_labeling_services_hold_every_persona_to_the_labeling_rule(world: World, name: str) -> None:
    from django.contrib.auth.models import AnonymousUser

    from annotate import permissions
    from annotate.services.errors import NotAllowed

    rule = _labeling_calls()[name]
    wrong = []
    for role, expected in zip(ROLES, rule.access, strict=True):
        user = AnonymousUser() if role == "anonymous" else world.users[role]
        try:
            rule.call(world, user)
        except NotAllowed as refusal:
            got, words = "-", str(refusal)
            want = rule.anonymous if role == "anonymous" else rule.refused
            if words != want:
                wrong.append(f"{role}: refused with {words!r}, expected {want!r}")
        except permissions.NotAllowed as refusal:  # the generic refusal would reach pages as another error
            got = "?"
            wrong.append(f"{role}: refused with the generic NotAllowed ({refusal})")
        except Exception:  # noqa: BLE001 - past the check: the deliberately wrong input is refused
            got = "+"
        else:
            got = "+"
        if got != expected and got != "?":
            wrong.append(f"{role}: expected {'allowed' if expected == '+' else 'refused'}")
    assert not wrong, f"{name}: " + "; ".join(wrong)


@pytest.mark.django_db
@pytest.mark.parametrize("name", [name for name in LABELING_CALLS
                                  if name not in ("lease_next_solution", "resume_expired_lease")])
def test_a_labeler_removed_mid_lease_is_refused_by_every_labeling_service(world: World, name: str) -> None:
    """Deactivated in the campaign while holding a lease: their own assignment no longer lets them read or write
    (the owner check passes, the membership rule refuses). Not here: leasing (the matrix's outsiders cover it)
    and resuming, which hands back a lease still open without writing anything."""
    from annotate.models import Membership
    from annotate.services.errors import NotAllowed

    labeler = world.users["labeler_in"]
    Membership.objects.filter(campaign=world.a, user=labeler).update(is_active=False)
    with pytest.raises(NotAllowed, match="You are not an active labeler in this campaign"):
        _labeling_calls()[name].call(world, labeler)
