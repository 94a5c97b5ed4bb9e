"""TRL stepwise step modes: the chosen path only, or every rated alternative after its chosen prefix.

Checked on real PRM800K phase-1 rows (conversational: several rated completions per step) against counts
computed here straight from the JSON, independently of the exporter.
"""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from annotate.services.prm800k_import import import_prm800k
from rewards.exports import ExportOptions, export_campaign
from rewards.services.datasets import create_dataset_version

pytestmark = pytest.mark.django_db

ROWS = 60  # phase-1 train rows: enough for thousands of rated candidates, quick to import


def _phase1_rows(shared_data: Path) -> list[dict[str, Any]]:
    rows = []
    with (shared_data / "prm800k" / "phase1_train_reconstructed.jsonl").open() as handle:
        for line in handle:
            row = json.loads(line)
            if row["label"]["finish_reason"] in ("solution", "found_error"):
                rows.append(row)
            if len(rows) == ROWS:
                break
    return rows


def _expected(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Labeled steps and negatives of each mode, from the PRM800K JSON: the chosen path is followed while a
    completion is chosen (or written); every other distinct rated candidate at a reached position adds one step."""
    chosen_steps = chosen_negatives = extra_steps = extra_negatives = 0
    for row in rows:
        for position in row["label"]["steps"]:
            candidates = position["completions"] or []
            chosen, human = position["chosen_completion"], position["human_completion"]
            human_text = human["text"] if isinstance(human, dict) else human
            if human_text:
                taken, rating = human_text, 1
            elif chosen is not None:
                taken, rating = candidates[chosen]["text"], candidates[chosen]["rating"]
            else:
                first = candidates[0] if candidates else None
                taken, rating = (first["text"], -1) if first and first["rating"] == -1 else (None, None)
            if taken is not None and rating is not None:
                chosen_steps += 1
                chosen_negatives += rating == -1
            seen = {taken}
            for candidate in candidates:
                if candidate["rating"] is None or candidate["text"] in seen:
                    continue
                seen.add(candidate["text"])
                extra_steps += 1
                extra_negatives += candidate["rating"] == -1
            if chosen is None and not human_text or rating in (None, -1):
                break
    return {"chosen_steps": chosen_steps, "chosen_negatives": chosen_negatives,
            "alternatives_steps": chosen_steps + extra_steps,
            "alternatives_negatives": chosen_negatives + extra_negatives}


@pytest.fixture
def phase1_campaign(db, shared_data: Path, tmp_path: Path, campaign_factory):
    rows = _phase1_rows(shared_data)
    source = tmp_path / "phase1.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    # A stepwise-mode campaign on purpose: "auto" must see the rated alternatives in the labels themselves.
    campaign = campaign_factory("p1", name="PRM800K phase 1", mode="stepwise")
    assert import_prm800k(source, campaign).imported == ROWS
    return campaign, rows


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.open()]


def test_alternatives_rows_are_chosen_prefix_plus_each_rated_candidate(phase1_campaign, tmp_path: Path) -> None:
    campaign, rows = phase1_campaign
    expected = _expected(rows)
    chosen = _read(export_campaign(campaign, "trl-stepwise", tmp_path / "c.jsonl",
                                   ExportOptions(steps="chosen")).path)
    alternatives = _read(export_campaign(campaign, "trl-stepwise", tmp_path / "a.jsonl",
                                         ExportOptions(steps="alternatives")).path)
    assert sum(len(r["labels"]) for r in chosen) == expected["chosen_steps"]
    assert sum(r["labels"].count(False) for r in chosen) == expected["chosen_negatives"]
    paths = {r["assignment_id"]: r for r in chosen}
    extra = [r for r in alternatives if r not in chosen]
    assert len(chosen) + len(extra) == len(alternatives)
    assert len(extra) + expected["chosen_steps"] == expected["alternatives_steps"]  # one new labeled step each
    assert (sum(not r["labels"][-1] for r in extra) + expected["chosen_negatives"]
            == expected["alternatives_negatives"] > 50 * max(expected["chosen_negatives"], 1))
    keys = set()
    for row in extra:
        path = paths[row["assignment_id"]]
        prefix = len(row["completions"]) - 1
        # the chosen prefix, with its labels, then one rated alternative that differs from the path's own step
        assert row["completions"][:prefix] == path["completions"][:prefix]
        assert row["labels"][:prefix] == path["labels"][:prefix]
        assert prefix == len(path["completions"]) or row["completions"][-1] != path["completions"][prefix]
        assert row["labels"][-1] == (row["ratings"][-1] != -1)
        key = (row["assignment_id"], json.dumps(row["completions"]))
        assert key not in keys, "alternatives are deduplicated"
        keys.add(key)


def test_auto_mode_and_card_counts_both_modes(phase1_campaign, storage_dirs, tmp_path: Path) -> None:
    campaign, rows = phase1_campaign
    expected = _expected(rows)
    version = create_dataset_version(campaign)
    assert version is not None and version.spec["steps"] == "alternatives"  # the labels carry rated alternatives
    modes = version.counts["step_modes"]
    assert modes["chosen"]["labeled_steps"] == expected["chosen_steps"]
    assert modes["chosen"]["negatives"] == expected["chosen_negatives"]
    assert modes["alternatives"]["labeled_steps"] == expected["alternatives_steps"]
    assert modes["alternatives"]["negatives"] == expected["alternatives_negatives"]
    assert version.files["trl-stepwise"]["rows"] == modes["alternatives"]["rows"]
    card = (storage_dirs["media"] / version.file_name("card")).read_text()
    assert (f"| {modes['alternatives']['rows']} | {expected['alternatives_steps']} | "
            f"{expected['alternatives_negatives']} |") in card
    # the export command's --steps picks a mode; its default (auto) writes the version's file
    out = tmp_path / "x.jsonl"
    call_command("export_dataset", "--campaign", "p1", "--format", "trl-stepwise", "--out", str(out),
                 stdout=io.StringIO())
    assert len(_read(out)) == modes["alternatives"]["rows"]
    call_command("export_dataset", "--campaign", "p1", "--format", "trl-stepwise", "--out", str(out),
                 "--steps", "chosen", stdout=io.StringIO())
    assert len(_read(out)) == modes["chosen"]["rows"]


def test_stepwise_campaign_without_alternatives_stays_on_the_chosen_path(math500_campaign, storage_dirs) -> None:
    version = create_dataset_version(math500_campaign)
    assert version is not None and version.spec["steps"] == "chosen"
    modes = version.counts["step_modes"]
    assert modes["chosen"] == modes["alternatives"] and modes["chosen"]["rows"] == 24
