"""The demo campaign: real, openly licensed data from ``annotate/demo_data`` (see its README for origin and license).

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

from .grading import answers_match
from .models import Campaign, CampaignMode, Membership, Role, Solution
from .prm800k import import_prm800k
from .services.problems import import_problems, import_solutions
from .steps import answer_from_steps

DEMO_DATA = Path(__file__).resolve().parent / "demo_data"
DEMO_SLUG = "demo"
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
    return report.imported


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
    with transaction.atomic():
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
        report.passwords = ensure_accounts(campaign, password)
    return report
