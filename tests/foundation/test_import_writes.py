"""The import's bulk writes: PostgreSQL's COPY path and the embedded SQLite path store the same rows, and the
foreign keys that the COPY path checks in bulk (instead of one trigger per row) are still enforced.

Run as a script (``python test_import_writes.py FILE...``) it imports the files into a fresh SQLite database
named by ``DATABASE_URL`` and prints the canonical dump: how the SQLite side of the comparison is produced.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = "writes"
# (model, fields compared) — timestamps "now" differ between two imports and are left out.
TABLES = [
    ("Problem", ["id", "text", "text_sha256", "answer", "solution", "subject", "level", "source_id"]),
    ("Solution", ["id", "campaign_id", "problem_id", "generator", "sample_index", "final_answer", "is_correct",
                  "verifier_score", "generation", "is_quality_control", "is_screening", "gold_first_error",
                  "pre_generated_steps", "provenance", "source_extra", "content_sha256", "label_count"]),
    ("Assignment", ["id", "solution_id", "labeler_id", "status", "finished_at", "finish_reason", "total_time_ms",
                    "is_gold", "source_timestamp", "source_extra"]),
    ("Step", ["id", "solution_id", "index"]),
    ("Completion", ["id", "step_id", "index", "text"]),
    ("Rating", ["id", "assignment_id", "completion_id", "rating", "flagged", "time_ms"]),
    ("StepDecision", ["id", "assignment_id", "step_id", "chosen_completion", "human_completion"]),
]


def canonical_dump() -> dict[str, Any]:
    """Every imported row of the campaign, primary and foreign keys replaced by ranks (the two databases number
    rows differently), labelers and the campaign by name; plus the PRM800K export."""
    from django.contrib.auth import get_user_model

    from annotate import models
    from annotate.prm800k.export import iter_prm800k_rows

    campaign = models.Campaign.objects.get(slug=CAMPAIGN)
    scopes = {
        "Problem": {"solutions__campaign": campaign}, "Solution": {"campaign": campaign},
        "Assignment": {"solution__campaign": campaign}, "Step": {"solution__campaign": campaign},
        "Completion": {"step__solution__campaign": campaign}, "Rating": {"assignment__solution__campaign": campaign},
        "StepDecision": {"assignment__solution__campaign": campaign},
    }
    ranks: dict[str, dict[int, int]] = {}
    dump: dict[str, Any] = {}
    for name, fields in TABLES:
        model = getattr(models, name)
        rows = list(model.objects.filter(**scopes[name]).distinct().order_by("pk").values_list(*fields))
        ranks[name] = {row[0]: rank for rank, row in enumerate(rows)}
        dump[name] = rows
    names = {"users": dict(get_user_model().objects.values_list("pk", "username")),
             "campaigns": dict(models.Campaign.objects.values_list("pk", "slug"))}
    parents = {"campaign_id": "campaigns", "problem_id": "Problem", "solution_id": "Solution", "labeler_id": "users",
               "step_id": "Step", "assignment_id": "Assignment", "completion_id": "Completion"}
    for name, fields in TABLES:
        converted = []
        for row in dump[name]:
            values = dict(zip(fields, row, strict=True))
            values["id"] = ranks[name][values["id"]]
            for field, parent in parents.items():
                if values.get(field) is not None:
                    values[field] = (names if parent in names else ranks)[parent][values[field]]
            if values.get("finished_at") is not None:
                values["finished_at"] = values["finished_at"].isoformat()
            converted.append(values)
        dump[name] = converted
    assignments = models.Assignment.objects.filter(solution__campaign=campaign)
    dump["export"] = list(iter_prm800k_rows(assignments))
    return dump


def _import(files: list[str]) -> None:
    from annotate.services.prm800k_import import import_prm800k
    from tests.factories import CampaignFactory

    campaign = CampaignFactory(slug=CAMPAIGN, name=CAMPAIGN)
    for file in files:
        import_prm800k(file, campaign, skip_invalid=True)


def _sample_files(shared_data: Path, tmp_path: Path) -> list[str]:
    """Genuine rows, the reconstructed phase-1 rows (several completions per step, human completions, rows
    that are rejected) and generated rows over a problem already imported."""
    generated = tmp_path / "generated.jsonl"
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from import_export import generate
    finally:
        sys.path.remove(str(ROOT / "bench"))
    generate(generated, 60, 7)
    return [str(shared_data / "prm800k" / "genuine_rows.jsonl"),
            str(shared_data / "prm800k" / "phase1_test_reconstructed.jsonl"), str(generated), str(generated)]


@pytest.mark.django_db(transaction=True)
def test_copy_and_sqlite_paths_store_identical_rows(shared_data: Path, tmp_path: Path, settings) -> None:
    """Small batches, so that rows reference rows of earlier batches and problems already imported."""
    settings.STEPLAB_IMPORT_BATCH = 7
    files = _sample_files(shared_data, tmp_path)
    _import(files)
    on_postgresql = canonical_dump()
    assert len(on_postgresql["Rating"]) > 1000 and len(on_postgresql["export"]) > 150

    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path / 'embedded.sqlite3'}", STEPLAB_IMPORT_BATCH="7",
               DJANGO_SETTINGS_MODULE="steplab.settings")
    env.pop("REDIS_URL", None)
    result = subprocess.run([sys.executable, __file__, *files], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    on_sqlite = json.loads(result.stdout.splitlines()[-1])
    for name, _ in TABLES:
        assert json.loads(json.dumps(on_postgresql[name])) == on_sqlite[name], f"{name} rows differ"
    assert on_postgresql["export"] == on_sqlite["export"]


@pytest.mark.django_db
def test_bulk_checked_foreign_key_names_the_missing_key(campaign_factory) -> None:
    from django.db import IntegrityError, transaction

    from annotate.models import Step
    from steplab.bulk import insert_rows
    from tests.factories import SolutionFactory

    solution = SolutionFactory(campaign=campaign_factory(), problem__text="1+1?")
    with pytest.raises(IntegrityError, match=rf'"solution_id": key \(solution_id\)=\({solution.pk + 1000}\) is not '
                                             r'present in table "annotate_solution"'), transaction.atomic():
        insert_rows(Step, ["solution_id", "index"], [(solution.pk, 0), (solution.pk + 1000, 0)])
    assert not Step.objects.exists()
    insert_rows(Step, ["solution_id", "index"], [(solution.pk, 0), (solution.pk, 1)])
    assert list(Step.objects.values_list("index", flat=True)) == [0, 1]


@pytest.mark.django_db
def test_copy_text_keeps_every_character(campaign_factory) -> None:
    """The COPY rows are written in PostgreSQL's text format here: escapes, NULLs, JSON and timestamps."""
    from annotate.models import Completion, Step, StepDecision
    from steplab.bulk import insert_rows
    from tests.factories import AssignmentFactory, SolutionFactory

    text = "a\\b \\N \t tab \n newline \r\n crlf \\\\frac{1}{2} ünï €"
    solution = SolutionFactory(campaign=campaign_factory(), problem__text="4+4?")
    assignment = AssignmentFactory(solution=solution)
    [step] = insert_rows(Step, ["solution_id", "index"], [(solution.pk, 0)])
    insert_rows(Completion, ["step_id", "index", "text"], [(step, 0, text), (step, 1, "")])
    human = {"text": text, "rating": None, "source": "human", "flagged": None}
    insert_rows(StepDecision, ["assignment_id", "step_id", "chosen_completion", "human_completion"],
                [(assignment.pk, step, None, human)])
    assert list(Completion.objects.order_by("index").values_list("text", flat=True)) == [text, ""]
    decision = StepDecision.objects.get()
    assert decision.human_completion == human and decision.chosen_completion is None
    assert decision.updated_at is not None


@pytest.mark.django_db
def test_without_the_privilege_the_row_triggers_check_the_keys(campaign_factory) -> None:
    """A role that may not set session_replication_role keeps PostgreSQL's own per-row checks."""
    from django.db import IntegrityError, connection, transaction

    from annotate.models import Step
    from steplab.bulk import insert_rows
    from tests.factories import SolutionFactory

    solution = SolutionFactory(campaign=campaign_factory(), problem__text="2+2?")
    with connection.cursor() as cursor:
        cursor.execute("CREATE ROLE steplab_test_importer NOSUPERUSER")
        cursor.execute("GRANT ALL ON ALL TABLES IN SCHEMA public TO steplab_test_importer")
        cursor.execute("GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO steplab_test_importer")
        cursor.execute("SET LOCAL ROLE steplab_test_importer")
        cursor.execute("SELECT has_parameter_privilege('session_replication_role', 'SET')")
        assert cursor.fetchone()[0] is False
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    with pytest.raises(IntegrityError, match="is not present in table"), transaction.atomic():
        insert_rows(Step, ["solution_id", "index"], [(solution.pk + 1000, 0)])
    insert_rows(Step, ["solution_id", "index"], [(solution.pk, 0)])
    assert Step.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_bulk_check_locks_the_referenced_rows_until_commit(campaign_factory) -> None:
    """As PostgreSQL's own check would: no other transaction can delete a referenced row before the import
    commits."""
    import psycopg
    from django.conf import settings as django_settings
    from django.db import transaction

    from annotate.models import Solution
    from steplab.bulk import insert_rows
    from tests.factories import ProblemFactory

    problem = ProblemFactory(text="3+3?")
    campaign = campaign_factory()
    db = django_settings.DATABASES["default"]
    other = psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"],
                            password=db["PASSWORD"] or None, dbname=db["NAME"], autocommit=True)
    try:
        other.execute("SET lock_timeout = '200ms'")
        with transaction.atomic():
            insert_rows(Solution, ["campaign_id", "problem_id"], [(campaign.pk, problem.pk)])
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("DELETE FROM annotate_problem WHERE id = %s", [problem.pk])
        assert Solution.objects.filter(problem=problem).count() == 1
    finally:
        other.close()



@pytest.mark.django_db(transaction=True)
def test_a_bad_line_after_batches_formatted_ahead_imports_nothing(tmp_path: Path, settings) -> None:
    """The read-ahead thread takes the next batches' ids on its own connection and formats their rows; the rows
    still go in only through the import's one transaction, so a bad last line leaves nothing behind."""
    from annotate.models import Assignment, Completion, Rating, Solution, Step, StepDecision
    from annotate.services.importing import ImportFailed
    from annotate.services.prm800k_import import import_prm800k
    from tests.factories import CampaignFactory

    settings.STEPLAB_IMPORT_BATCH = 5
    path = tmp_path / "late-error.jsonl"
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from import_export import generate
    finally:
        sys.path.remove(str(ROOT / "bench"))
    generate(path, 40, 4)  # 8 batches
    with path.open("a") as out:
        out.write('{"label": {"steps": "not a list"}}\n')
    campaign = CampaignFactory(slug="late-error", name="late error")
    with pytest.raises(ImportFailed) as failed:
        import_prm800k(path, campaign)
    assert [rejected.line for rejected in failed.value.report.rejected] == [41]
    for model in (Solution, Assignment, Step, Completion, Rating, StepDecision):
        assert not model.objects.exists(), model.__name__

    path.write_text("".join(path.read_text().splitlines(keepends=True)[:40]))
    report = import_prm800k(path, campaign)
    assert report.imported == 40 and Rating.objects.filter(assignment__solution__campaign=campaign).count() == 160
    # ids in file order across the batches: the export gives the rows back in the order they came
    texts = list(Completion.objects.order_by("pk").values_list("text", flat=True))
    assert texts == [json.loads(line)["label"]["steps"][index]["completions"][0]["text"]
                     for line in path.read_text().splitlines() for index in range(4)]

if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    _import(sys.argv[1:])
    print(json.dumps(canonical_dump(), default=str))
