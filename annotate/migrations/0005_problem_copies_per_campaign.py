"""Data: every problem gets an owner. A problem used by solutions (or labeling pools) of one campaign moves into
that campaign; one used by several campaigns is copied once per further campaign and their solutions and pool
entries are repointed to the copy, so nothing is lost and no campaign shares a row with another. Problems no
campaign uses stay in the staff-only bank (campaign NULL). Imported PRM800K labelers move to their own
namespace, so that an imported "admin" is never the account "admin"."""
from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import defaultdict

from django.db import migrations

IMPORTED_PREFIX = "imported:"


def _key(text: str) -> str:
    normalised = re.sub(r"\s+", " ", unicodedata.normalize("NFC", text)).strip()
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()


def forwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    Problem = apps.get_model("annotate", "Problem")
    Solution = apps.get_model("annotate", "Solution")
    PoolProblem = apps.get_model("jobs", "PoolProblem")
    users: dict[int, set[int]] = defaultdict(set)
    for problem_id, campaign_id in Solution.objects.values_list("problem_id", "campaign_id").distinct():
        users[problem_id].add(campaign_id)
    for problem_id, campaign_id in PoolProblem.objects.filter(pool__campaign__isnull=False).values_list(
            "problem_id", "pool__campaign_id").distinct():
        users[problem_id].add(campaign_id)
    taken: set[tuple[int | None, str]] = set()

    def unique_key(owner: int | None, text: str) -> str:
        # Two legacy rows whose texts differ only in spacing stay two rows (merging them could lose an answer).
        key = _key(text)
        if (owner, key) in taken:
            key = hashlib.sha256(("legacy-duplicate:" + text).encode("utf-8")).hexdigest()
        taken.add((owner, key))
        return key

    for problem in Problem.objects.order_by("pk").iterator():
        owners = sorted(users.get(problem.pk, ()))
        first, others = (owners[0], owners[1:]) if owners else (None, [])
        problem.campaign_id = first
        problem.key_sha256 = unique_key(first, problem.text)
        problem.save(update_fields=["campaign", "key_sha256"])
        for campaign_id in others:
            copy = Problem.objects.create(
                campaign_id=campaign_id, text=problem.text, text_sha256=problem.text_sha256,
                key_sha256=unique_key(campaign_id, problem.text), answer=problem.answer, solution=problem.solution,
                subject=problem.subject, level=problem.level, source_id=problem.source_id)
            Solution.objects.filter(problem_id=problem.pk, campaign_id=campaign_id).update(problem_id=copy.pk)
            PoolProblem.objects.filter(problem_id=problem.pk, pool__campaign_id=campaign_id).update(problem_id=copy.pk)

    User = apps.get_model("auth", "User")
    for user in User.objects.filter(password="!imported").exclude(username__startswith=IMPORTED_PREFIX):
        user.username = (IMPORTED_PREFIX + user.username)[:150]
        user.save(update_fields=["username"])


class Migration(migrations.Migration):

    dependencies = [
        ('annotate', '0004_problem_owned_by_campaign'),
        ('jobs', '0003_sampling_jobs_and_candidate_provenance'),
        ('auth', '0012_alter_user_first_name_max_length'),
    ]

    operations = [
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
