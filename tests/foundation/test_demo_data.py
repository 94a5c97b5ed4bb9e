"""The demo campaign answers the PRM-vs-ORM question from real data: all phase-1 labels, graded solutions, a pool."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings

from annotate.models import Assignment, Campaign, Rating
from demo.loader import DEMO_SLUG, final_answer_of, grade_labeled_solutions, load_demo
from rewards.jobs.models import Candidate, CandidatePool

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(settings, tmp_path: Path) -> Campaign:  # noqa: F811 (pytest-django's)
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.STEPLAB_EXPORT_TMP_DIR = tmp_path / "export-tmp"
    report = load_demo(password="demo-Password-1")
    assert report.loaded
    return Campaign.objects.get(slug=DEMO_SLUG)


def test_final_answer_is_found_after_the_answer_marker_anywhere_in_the_last_step() -> None:
    assert final_answer_of(["So 420 + 48 = 468.", "Exactly.\n\n# Answer\n\n468"]) == "468"
    assert final_answer_of(["# Answer\n\n\\frac{1}{2}"]) == "\\frac{1}{2}"
    assert final_answer_of(["The answer is $\\boxed{7}$."]) == "7"
    assert final_answer_of(["x = 3, so we continue."]) is None
    assert final_answer_of([]) is None


def test_demo_history_holds_every_phase1_label_graded_and_a_graded_pool(demo: Campaign) -> None:
    from rewards.services.datasets import create_dataset_version

    history = Assignment.objects.filter(solution__campaign=demo, status="submitted")
    assert history.count() == 10 + 101 + 900  # genuine rows, test and train reconstructions
    ratings = Rating.objects.filter(assignment__in=history)
    assert ratings.count() > 54_000 and ratings.filter(rating=-1).count() > 10_000
    # the labeling queue: the chosen paths of the first 150 train rows, unlabeled, some of them gold QC
    queue = demo.solutions.filter(assignments__isnull=True)
    assert queue.count() == 150 and queue.filter(is_quality_control=True, gold_first_error__isnull=False).exists()

    labeled = demo.solutions.filter(assignments__status="submitted")
    assert labeled.filter(is_correct=True).count() > 800 and labeled.filter(is_correct=False).count() > 10
    assert grade_labeled_solutions(demo)["correct"] == grade_labeled_solutions(demo)["wrong"] == 0  # idempotent

    version = create_dataset_version(demo)
    assert version is not None and version.spec["steps"] == "alternatives"
    modes = version.counts["step_modes"]
    assert modes["alternatives"]["negatives"] > 100 * max(modes["chosen"]["negatives"], 1)
    assert version.counts["outcome"]["correct"] > 800 and version.counts["outcome"]["wrong"] > 10
    # an outcome row of a phase-1 solution is the path the labeler took, whose answer was graded
    outcome = [json.loads(line) for line in (Path(settings.MEDIA_ROOT) / version.file_name("outcome")).open()]
    answered = [row for row in outcome if "# Answer" in row["completion"]]
    assert len(answered) > 800 and all(final_answer_of([row["completion"]]) for row in answered)

    pool = CandidatePool.objects.get(campaign=demo, name__contains="AIME")
    candidates = Candidate.objects.filter(pool_problem__pool=pool)
    assert pool.problems.count() == 30 and candidates.count() == 30 * 64
    assert 0 < candidates.filter(is_correct=True).count() < candidates.count()


def test_demo_serves_on_the_addrport_it_is_given(tmp_path: Path) -> None:
    """`manage.py demo --addrport` (what `./run demo --addrport` runs) on the embedded default, in its own var
    folder: it loads, then serves the login page on the port it was given."""
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(STEPLAB_VAR_DIR=str(tmp_path / "var"), STEPLAB_DEMO_PASSWORD="demo-Password-1")
    root = Path(__file__).resolve().parents[2]
    log = (tmp_path / "demo.log").open("w")
    server = subprocess.Popen([sys.executable, "manage.py", "demo", "--addrport", f"127.0.0.1:{port}", "--no-worker"],
                              cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 600  # the load runs first; the CPU may be shared
        status = None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5) as response:
                    status = response.status
                break
            except OSError:
                time.sleep(0.5)  # polling for the server to come up
        output = (tmp_path / "demo.log").read_text()
        assert status == 200, output
        assert f"serving on http://127.0.0.1:{port}/" in output and "loaded campaign 'demo'" in output
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
