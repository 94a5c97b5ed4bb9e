"""Letter grading against MMLU-Pro's own extraction: ``stepcore.graders``' multiple-choice grader reads the letter of
every response in ``shared/data/mmlu-pro/responses.jsonl`` and is compared with the benchmark's ``pred``.

    .venv/bin/python bench/graders.py [--responses PATH] [--questions PATH]

Where ``pred`` is set: agreement (target >= 99 %), with the disagreements sorted by why (the benchmark's ``pred`` of
a response that names no letter is its random fallback guess, which no reader can reproduce). Where ``pred`` is
null: how many the grader still reads, and on which kind of line. Also the accuracy each extraction gives against
the gold letters. Last line: one JSON object with the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stepcore.graders import get_grader  # noqa: E402 — after the path is set
from stepcore.graders.multiple_choice import _ANSWER_LINES  # noqa: E402

SHARED = Path(os.environ.get("STEPLAB_SHARED", "/work/shared")) / "data" / "mmlu-pro"
_BENCHMARK_LINE = re.compile(r"answer is \(?([A-J])\)?")


def _which_line(text: str) -> str:
    """The first answer-line pattern that reads ``text`` (its position in the grader's list), for the report."""
    for number, pattern in enumerate(_ANSWER_LINES):
        if pattern.search(text):
            return f"pattern {number}: {pattern.pattern[:48]}"
    return "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--responses", type=Path, default=SHARED / "responses.jsonl")
    parser.add_argument("--questions", type=Path, default=SHARED / "questions.jsonl")
    args = parser.parse_args()
    gold = {}
    options = {}
    with args.questions.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            gold[row["question_id"]] = row["answer"]
            options[row["question_id"]] = row["options"]
    grader = get_grader("multiple_choice")
    started = time.perf_counter()
    counts: Counter[str] = Counter()
    why_disagree: Counter[str] = Counter()
    read_when_null: Counter[str] = Counter()
    correct_ours = correct_pred = 0
    total = 0
    for line in args.responses.open(encoding="utf-8"):
        row = json.loads(line)
        total += 1
        text, pred = row["response"], row["pred"]
        ours = grader.extract(text, options=options.get(row["question_id"]))
        truth = gold.get(row["question_id"])
        correct_ours += bool(grader.grade(truth, ours))
        correct_pred += pred is not None and pred == truth
        if pred is None:
            counts["pred_null"] += 1
            if ours is not None:
                counts["pred_null_read"] += 1
                read_when_null[_which_line(text)] += 1
            continue
        counts["pred_set"] += 1
        if ours == pred:
            counts["agree"] += 1
        elif ours is None:
            # the benchmark's own "answer is (X)" found nothing either: its pred is the random fallback guess
            why_disagree["no answer line (benchmark pred is its fallback guess)" if not _BENCHMARK_LINE.search(text)
                         else "answer line the grader does not read"] += 1
        else:
            why_disagree[f"grader read another line ({_which_line(text)})"] += 1
    seconds = time.perf_counter() - started
    agreement = counts["agree"] / counts["pred_set"]
    print(f"responses: {total} ({counts['pred_set']} with pred, {counts['pred_null']} with pred null)")
    print(f"agreement with pred where pred is set: {counts['agree']}/{counts['pred_set']} = {100 * agreement:.2f} %")
    for reason, count in why_disagree.most_common():
        print(f"  disagree: {count:6d}  {reason}")
    print(f"pred null but read by the grader: {counts['pred_null_read']} of {counts['pred_null']}")
    for reason, count in read_when_null.most_common():
        print(f"  read on {reason}: {count}")
    print(f"accuracy vs gold: grader {100 * correct_ours / total:.2f} %, "
          f"benchmark pred {100 * correct_pred / total:.2f} %")
    print(f"time: {seconds:.1f} s ({1e6 * seconds / total:.0f} µs per response)")
    print(json.dumps({
        "responses": total, "pred_set": counts["pred_set"], "agree": counts["agree"],
        "agreement_pct": round(100 * agreement, 3), "disagree": dict(why_disagree),
        "pred_null": counts["pred_null"], "pred_null_read": counts["pred_null_read"],
        "pred_null_read_by": dict(read_when_null), "accuracy_grader_pct": round(100 * correct_ours / total, 2),
        "accuracy_pred_pct": round(100 * correct_pred / total, 2), "seconds": round(seconds, 1),
        "target_met": agreement >= 0.99,
    }))


if __name__ == "__main__":
    main()
