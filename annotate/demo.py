"""The demo campaign: real, openly licensed data from ``annotate/demo_data`` (see its README for origin and license).

Loading is idempotent: a campaign that already holds solutions is left as it is, only the accounts are
ensured. Everything goes through the same importers as ``import_problems`` / ``import_prm800k`` /
``import_solutions``, so the demo exercises the real code paths.
"""
from __future__ import annotations

import json
import secrets
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from .models import Campaign, CampaignMode, Membership, Role
from .prm800k import import_prm800k
from .services.problems import import_problems, import_solutions
from .steps import answer_from_steps

DEMO_DATA = Path(__file__).resolve().parent / "demo_data"
DEMO_SLUG = "demo"
UNKNOWN_REASON = "finish reason unknown in the reconstruction"
INSTRUCTIONS = """\
Rate **every step** of the model's solution, in order:

* **+1 (great)** — correct and moves the solution forward;
* **0 (okay)** — reasonable but not helpful, or an ambiguous/uncertain step;
* **−1 (bad)** — wrong, or misleading. Rating a step −1 ends the solution: later steps are not rated.

Use the flag when you are unsure. If the problem itself is broken, choose *Bad problem*; if you cannot decide,
*Give up* — both need a short reason. Shortcuts: `1` `2` `3` rate, `j`/`k` move, `f` flags, `Enter` next, `?` help.

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


def _reconstructed_rows(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.open(encoding="utf-8"):
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


def _solutions_to_label(path: Path, qc_every: int) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(path.open(encoding="utf-8")):
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


def _missing(value: Any) -> bool:
    return value is None or value == "None"


def _train_problems(path: Path) -> Iterator[dict[str, Any]]:
    """Problems of the phase-1 train rows. The reconstruction lost their ground truth (the string "None"):
    the answer of a chosen path that the labeler finished as a correct ``solution`` stands in for it."""
    for line in path.open(encoding="utf-8"):
        row = json.loads(line)
        question = row["question"]
        answer = None if _missing(question["ground_truth_answer"]) else question["ground_truth_answer"]
        if answer is None:
            steps, gold = chosen_path(row)
            answer = answer_from_steps(steps) if gold == -1 else None
        solution = question.get("ground_truth_solution")
        yield {"problem": question["problem"], "answer": answer, "solution": None if _missing(solution) else solution}


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


def load_demo(*, password: str | None = None, qc_every: int = 6) -> DemoReport:
    with transaction.atomic():
        campaign, _ = Campaign.objects.get_or_create(slug=DEMO_SLUG, defaults={
            "name": "Demo: PRM800K step labels on MATH", "mode": CampaignMode.STEPWISE, "instructions": INSTRUCTIONS,
            "overlap": 1, "qc_rate": 0.1, "lease_minutes": 30,
        })
        report = DemoReport(loaded=False)
        if not campaign.solutions.exists():
            report.loaded = True
            report.counts["problems"] = import_problems(DEMO_DATA / "math500.jsonl").imported
            history = import_prm800k(DEMO_DATA / "genuine_rows.jsonl", campaign).imported
            history += _with_temp_jsonl(_reconstructed_rows(DEMO_DATA / "phase1_test_reconstructed.jsonl"),
                                        lambda path: import_prm800k(path, campaign)).imported
            report.counts["labeled_history"] = history
            # Chosen paths of train problems that are not MATH-500 problems: import_solutions needs them first.
            train = DEMO_DATA / "phase1_train_reconstructed_first150.jsonl"
            _with_temp_jsonl(_train_problems(train), import_problems)
            report.counts["to_label"] = _with_temp_jsonl(_solutions_to_label(train, qc_every),
                                                         lambda path: import_solutions(path, campaign)).imported
        report.passwords = ensure_accounts(campaign, password)
    return report
