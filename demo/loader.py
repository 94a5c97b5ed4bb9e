"""The demo campaign: real, openly licensed data from ``demo/data`` (see its README for origin and license).

Loading is idempotent: a campaign that already holds solutions is left as it is, only the accounts are
ensured (and labeled solutions still without a verdict are graded). Everything goes through the same importers
as ``import_problems`` / ``import_prm800k`` / ``import_solutions`` / ``import_pool``, so the demo exercises the
real code paths. The labeled history is every openly licensed PRM800K phase-1 label (train and test
reconstructions, the genuine rows), its problems carry the MATH ground truth, so its labeled solutions are graded
and both the step (alternatives mode) and the outcome datasets have real negatives; the AIME 2025 samples are the
campaign's best-of-N pool.
"""
from __future__ import annotations

import gzip
import json
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from annotate.models import Campaign, CampaignMode, Membership, Role, Solution
from annotate.permissions import SYSTEM
from annotate.services.campaign_problems import bank_access
from annotate.services.prm800k_import import import_prm800k
from annotate.services.problems import import_problems, import_solutions
from stepcore.graders import get_grader
from stepcore.grading import answers_match
from stepcore.steps import answer_from_steps

DEMO_DATA = Path(__file__).resolve().parent / "data"
DEMO_SLUG = "demo"
MMLU_SLUG = "demo-mmlu"
MMLU_DATA = DEMO_DATA / "mmlu_pro"
#: the models whose answers make demo-mmlu's labeling queue (the pool holds every model's)
MMLU_QUEUE_MODELS = ("Mixtral-8x7B-Instruct-v0.1", "Mistral-7B-Instruct-v0.2")
MMLU_POOL_QUESTIONS_PER_DOMAIN = 15
#: other MMLU-Pro math questions than the headroom pool's, and the 11 models' answers to them: graded answers, most of
#: them wrong, that the outcome export hands the ORM (the paper's ORM learns from every graded sample)
MMLU_TRAINING_FILES = ("math_training_questions.jsonl.gz", "math_training_responses.jsonl.gz")
MMLU_ERROR_CATEGORIES = ["factual error", "misread the question", "invalid inference", "calculation",
                         "unsupported claim"]
MMLU_INSTRUCTIONS = """\
Each answer below was written by a language model for a **multiple-choice question** (MMLU-Pro: ten options,
A–J, shown with the question). Rate **every sentence** of its reasoning, in order:

* **+1 (great)** — correct and moves the answer forward;
* **0 (okay)** — true but not helpful, or you cannot tell;
* **−1 (bad)** — a false claim, a misreading of the question or an inference that does not follow. A −1 stops
  the answer there. After the error key you may name the kind of error (its number key).

The correct option is shown as the *current guess of the correct answer*. Shortcuts: `1` `2` `3` rate,
`j`/`k` move, `f` Unsure, `Enter` submit, `?` help.
"""
INSTRUCTIONS = """\
Rate **every step** of the model's solution, in order:

* **+1 (great)** — correct and moves the solution forward;
* **0 (okay)** — reasonable but not helpful, or an ambiguous/uncertain step;
* **−1 (bad)** — wrong, or misleading. A −1 stops the solution there: later steps are not rated. Press
  *Submit* (`Enter`) to confirm it; until then you can still change it.

Mark a step *Unsure* when you are not sure of your rating. If the problem itself is broken, choose *Bad problem*;
if you cannot decide, *Give up* — both need a short reason. Shortcuts: `1` `2` `3` rate, `j`/`k` move,
`f` Unsure, `Enter` submit, `?` help.

The ground-truth answer is shown as the *current guess of the correct answer*: e.g. $\\frac{1}{2}$.
"""


@dataclass
class DemoReport:
    loaded: bool
    counts: dict[str, int] = field(default_factory=dict)
    passwords: dict[str, str] = field(default_factory=dict)
    mmlu_counts: dict[str, int] = field(default_factory=dict)  # empty: demo-mmlu was already loaded


def chosen_path(row: dict[str, Any]) -> tuple[list[str], int | None]:
    """The steps a PRM800K labeler continued with, and the path's first-error index from their ratings.

    Returns (steps, gold_first_error); gold is −1 for a path finished as a correct ``solution`` with no −1,
    None when unknown (the labeling ended without a verdict).
    """
    label = row["label"]
    steps: list[str] = []
    first_error: int | None = None
    for position in label["steps"]:
        completions = position["completions"]
        human = position.get("human_completion")
        chosen = position.get("chosen_completion")
        if chosen is not None:
            picked = completions[chosen]
        elif human:
            picked = human if isinstance(human, dict) else {"text": human, "rating": 1}
        else:  # the labeling stopped here: the first −1 candidate is the error they found
            picked = next((c for c in completions if c.get("rating") == -1), None)
            if picked is None:
                break
        steps.append(str(picked["text"]))
        if picked.get("rating") == -1 and first_error is None:
            first_error = len(steps) - 1
            break
    if first_error is None and label["finish_reason"] == "solution":
        first_error = -1
    return steps, first_error


def final_answer_of(steps: list[str]) -> str | None:
    """The answer a PRM800K path reaches. Phase-1 labelers often ended a step with the answer block
    ("Exactly.\n\n# Answer\n\n468"), so the ``# Answer`` marker is looked for anywhere in the last step."""
    if not steps:
        return None
    last = steps[-1]
    marker = last.find("# Answer")
    if marker >= 0:
        return last[marker + len("# Answer"):].strip() or None
    return answer_from_steps(steps)


def _lines(path: Path) -> Iterator[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        yield from handle


def _reconstructed_rows(path: Path) -> Iterator[dict[str, Any]]:
    for line in _lines(path):
        row = json.loads(line)
        if row["label"]["finish_reason"] == "give_up_or_unknown":
            row["label"]["finish_reason"] = "give_up"
        yield row


def _with_temp_jsonl(rows: Iterator[dict[str, Any]], action: Callable[[Path], Any]) -> Any:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=True) as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
        handle.flush()
        return action(Path(handle.name))


def _solutions_to_label(path: Path, qc_every: int, count: int) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(_lines(path)):
        if number == count:
            return
        row = json.loads(line)
        steps, gold = chosen_path(row)
        if not steps:
            continue
        is_qc = gold is not None and number % qc_every == 0
        yield {
            "problem": row["question"]["problem"], "steps": steps, "generator": "prm800k-phase1-chosen-path",
            "sample_index": number, "generation": 1, "is_quality_control": is_qc,
            "gold_first_error": gold if is_qc else None,
            "provenance": {"source": "PRM800K phase-1 train reconstruction (chosen path)", "line": number + 1},
        }


def _unzipped(path: Path, action: Callable[[Path], Any]) -> Any:
    with tempfile.NamedTemporaryFile("wb", suffix=path.name.removesuffix(".gz"), delete=True) as handle:
        with gzip.open(path, "rb") as source:
            shutil.copyfileobj(source, handle)
        handle.flush()
        return action(Path(handle.name))


def grade_labeled_solutions(campaign: Campaign) -> dict[str, int]:
    """Grade the campaign's solutions that have no verdict yet and whose problem has a ground truth: the final
    answer of the path their first finished labeling took (``# Answer`` anywhere in its last step) against the
    problem's answer (a phase-2 row's ``pre_generated_answer``), with the project's grader. Idempotent: graded
    solutions are left alone, so it is a no-op once the importer grades on its own. Returns how many became correct,
    wrong, and stayed without an answer."""
    from rewards.exports import solution_paths

    pending = list(Solution.objects.filter(campaign=campaign, is_correct__isnull=True, problem__answer__isnull=False,
                                           assignments__status="submitted")
                   .exclude(problem__answer="").distinct().values_list("pk", "problem__answer", "final_answer"))
    paths = solution_paths([pk for pk, _, answer in pending if answer is None])
    verdicts: dict[bool, list[int]] = {True: [], False: []}
    ungraded = 0
    for pk, truth, answer in pending:  # phase 2 rows carry their answer (pre_generated_answer)
        verdict = answers_match(truth, answer if answer is not None else final_answer_of(paths.get(pk, [])))
        if verdict is None:
            ungraded += 1
        else:
            verdicts[verdict].append(pk)
    for verdict, ids in verdicts.items():
        Solution.objects.filter(pk__in=ids).update(is_correct=verdict)
    return {"correct": len(verdicts[True]), "wrong": len(verdicts[False]), "no_answer": ungraded}


def import_demo_pool(campaign: Campaign) -> int:
    """The campaign's best-of-N pool: 64 real samples per AIME 2025 problem, split and graded at import."""
    from rewards.jobs.models import CandidatePool
    from rewards.jobs.services.pools import import_pool

    name = f"{campaign.slug}: AIME 2025 I+II, 64 samples"
    if CandidatePool.objects.filter(name=name, campaign=campaign).exists():  # names are per campaign
        return 0
    pool, report = _unzipped(DEMO_DATA / "aime2025_k64.jsonl.gz",
                             lambda path: import_pool(path, name, campaign=campaign))
    # the file went through a temporary copy: "Source" names the data, not that copy
    CandidatePool.objects.filter(pk=pool.pk).update(
        source="demo data: aime2025_k64.jsonl.gz (FrozenWolf-Cyber/Math-PRM, Apache-2.0)")
    return report.imported


def _mmlu_rows(name: str) -> Iterator[dict[str, Any]]:
    for line in _lines(MMLU_DATA / name):
        yield json.loads(line)


def mmlu_questions(*, math: bool) -> list[dict[str, Any]]:
    """The demo's MMLU-Pro questions: the math ones (the headroom pool) or the other domains' (demo-mmlu)."""
    return [row for row in _mmlu_rows("questions.jsonl.gz") if (row["category"] == "math") == math]


def mmlu_pool_questions(questions: list[dict[str, Any]],
                        per_domain: int = MMLU_POOL_QUESTIONS_PER_DOMAIN) -> list[dict[str, Any]]:
    """The questions of demo-mmlu's best-of-N pool: the first ``per_domain`` of each category, in file order."""
    counts: dict[str, int] = {}
    pooled = []
    for row in questions:
        if counts.get(row["category"], 0) < per_domain:
            counts[row["category"]] = counts.get(row["category"], 0) + 1
            pooled.append(row)
    return pooled


def pool_rows(question_ids: set[int], responses: str = "responses.jsonl.gz") -> Iterator[dict[str, Any]]:
    """MMLU-Pro answers as a pool's per-candidate rows: the question by its id, the answer text, and where it came
    from (the benchmark's own reading of the letter, ``pred``, rides along as provenance)."""
    for row in _mmlu_rows(responses):
        if row["question_id"] in question_ids:
            yield {"problem_id": str(row["question_id"]), "solution": row["response"],
                   "provenance": {"model": row["model"], "pred": row["pred"], "source": "MMLU-Pro eval_results"}}


def import_mmlu_pool(campaign: Campaign, name: str, questions: list[dict[str, Any]],
                     responses: str = "responses.jsonl.gz") -> int:
    """A best-of-N pool of every model's answer to ``questions`` (already the campaign's problems), split into
    sentences and graded by the letter chosen, whatever the campaign's own grader."""
    from rewards.jobs.models import CandidatePool
    from rewards.jobs.services.pools import import_pool

    if CandidatePool.objects.filter(name=name, campaign=campaign).exists():
        return 0
    ids = {row["question_id"] for row in questions}
    pool, report = _with_temp_jsonl(pool_rows(ids, responses), lambda path: import_pool(
        path, name, campaign=campaign, split_rule="sentence", grader=get_grader("multiple_choice")))
    CandidatePool.objects.filter(pk=pool.pk).update(
        source=f"demo data: mmlu_pro/{responses} (TIGER-AI-Lab/MMLU-Pro, Apache-2.0)")
    return report.imported


def headroom_pool_name(campaign: Campaign) -> str:
    return f"{campaign.slug}: MMLU-Pro math, 11 models (graded by letter)"


def import_headroom_pool(campaign: Campaign) -> int:
    """The math demo's pool with headroom: MMLU-Pro's math questions (options kept) and 11 models' answers,
    marked as the campaign's default for the PRM-vs-ORM comparison (the compare form preselects it)."""
    from rewards.jobs.models import CandidatePool

    name = headroom_pool_name(campaign)
    imported = 0
    if not CandidatePool.objects.filter(name=name, campaign=campaign).exists():
        questions = mmlu_questions(math=True)
        _with_temp_jsonl(iter(questions), lambda path: import_problems(path, campaign))
        imported = import_mmlu_pool(campaign, name, questions)
    CandidatePool.objects.filter(campaign=campaign).update(comparison_default=False)
    CandidatePool.objects.filter(campaign=campaign, name=name).update(comparison_default=True)
    return imported


def training_pool_name(campaign: Campaign) -> str:
    return f"{campaign.slug}: MMLU-Pro math, other questions, 11 models (ORM training answers)"


def import_training_answers(campaign: Campaign) -> int:
    """The math demo's graded answers to other MMLU-Pro math questions than the headroom pool's, as a pool of its
    own: the outcome export holds them, so the comparison's ORM, which leaves out the headroom pool's problems,
    learns from about 1,200 wrong answers to questions like the ones it ranks."""
    from rewards.jobs.models import CandidatePool

    name = training_pool_name(campaign)
    if CandidatePool.objects.filter(name=name, campaign=campaign).exists():
        return 0
    questions = list(_mmlu_rows(MMLU_TRAINING_FILES[0]))
    _with_temp_jsonl(iter(questions), lambda path: import_problems(path, campaign))
    return import_mmlu_pool(campaign, name, questions, responses=MMLU_TRAINING_FILES[1])


def load_demo_mmlu() -> dict[str, int]:
    """Campaign ``demo-mmlu`` (idempotent: left as it is once it holds solutions); returns what it loaded."""
    campaign, _ = Campaign.objects.get_or_create(slug=MMLU_SLUG, defaults={
        "name": "Demo: step labels beyond math (MMLU-Pro, 6 domains)", "mode": CampaignMode.STEPWISE,
        "instructions": MMLU_INSTRUCTIONS, "overlap": 1, "lease_minutes": 30, "grader": "multiple_choice",
        "step_rule": "sentence", "error_categories": MMLU_ERROR_CATEGORIES,
    })
    if campaign.solutions.exists():
        return {}
    questions = mmlu_questions(math=False)
    counts = {"problems": _with_temp_jsonl(iter(questions), lambda path: import_problems(path, campaign)).imported}
    ids = {row["question_id"] for row in questions}
    queue = (row for row in _mmlu_rows("responses.jsonl.gz")
             if row["question_id"] in ids and row["model"] in MMLU_QUEUE_MODELS)
    counts["to_label"] = _with_temp_jsonl(queue, lambda path: import_solutions(path, campaign)).imported
    counts["pool_candidates"] = import_mmlu_pool(campaign, f"{MMLU_SLUG}: 11 models per question",
                                                 mmlu_pool_questions(questions))
    return counts


def ensure_accounts(campaign: Campaign, password: str | None) -> dict[str, str]:
    """Demo users ``labeler``, ``admin`` (staff) and ``researcher``; returns the passwords it set."""
    User = get_user_model()
    set_passwords: dict[str, str] = {}
    for username, role in (("labeler", Role.LABELER), ("admin", Role.ADMIN), ("researcher", Role.RESEARCHER)):
        user, created = User.objects.get_or_create(username=username, defaults={"email": f"{username}@example.org"})
        if created or password:
            secret = password or secrets.token_urlsafe(12)
            user.set_password(secret)
            set_passwords[username] = secret
        if username == "admin":
            user.is_staff = user.is_superuser = True
        user.is_active = True
        user.save()
        Membership.objects.update_or_create(campaign=campaign, user=user,
                                            defaults={"role": role, "is_active": True, "passed_screening": True})
    return set_passwords


def load_demo(*, password: str | None = None, qc_every: int = 6, to_label: int = 150) -> DemoReport:
    with transaction.atomic(), bank_access(SYSTEM):  # its solutions name the problems it puts in the staff bank
        campaign, _ = Campaign.objects.get_or_create(slug=DEMO_SLUG, defaults={
            "name": "Demo: PRM800K step labels on MATH", "mode": CampaignMode.STEPWISE, "instructions": INSTRUCTIONS,
            "overlap": 1, "qc_rate": 0.1, "lease_minutes": 30,
        })
        report = DemoReport(loaded=False)
        if not campaign.solutions.exists():
            report.loaded = True
            report.counts["problems"] = import_problems(DEMO_DATA / "math500.jsonl").imported
            # the phase-1 train problems with their MATH answers (texts exactly as in PRM800K, so rows join them)
            report.counts["problems"] += import_problems(DEMO_DATA / "math_train_answers.jsonl").imported
            history = import_prm800k(DEMO_DATA / "genuine_rows.jsonl", campaign).imported
            for name in ("phase1_test_reconstructed.jsonl", "phase1_train_reconstructed.jsonl.gz"):
                history += _with_temp_jsonl(_reconstructed_rows(DEMO_DATA / name),
                                            lambda path: import_prm800k(path, campaign)).imported
            report.counts["labeled_history"] = history
            # Chosen paths of the first train rows, without their labels, are the labeling queue.
            report.counts["to_label"] = _with_temp_jsonl(
                _solutions_to_label(DEMO_DATA / "phase1_train_reconstructed.jsonl.gz", qc_every, to_label),
                lambda path: import_solutions(path, campaign)).imported
        graded = grade_labeled_solutions(campaign)
        if report.loaded:
            report.counts.update({f"graded_{key}": value for key, value in graded.items()})
            report.counts["pool_candidates"] = import_demo_pool(campaign)
        # a demo loaded before the headroom pool existed gets it too
        report.counts["headroom_pool_candidates"] = import_headroom_pool(campaign)
        report.counts["orm_training_candidates"] = import_training_answers(campaign)
        report.passwords = ensure_accounts(campaign, password)
        report.mmlu_counts = load_demo_mmlu()
        mmlu = Campaign.objects.get(slug=MMLU_SLUG)
        # the same accounts, same roles, in the second campaign (passwords were set above)
        ensure_accounts(mmlu, None)
    return report
