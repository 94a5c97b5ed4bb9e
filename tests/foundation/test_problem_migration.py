"""The migration that gives every problem an owner: a problem shared by several campaigns is copied once per
further campaign and their solutions repointed, nothing lost; unused problems stay in the staff bank; imported
PRM800K labelers move to their own namespace."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("annotate", "0003_import_job_dispatched_at")]


def _migrate(targets: list[tuple[str, str]]):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def test_shared_problems_are_copied_per_campaign_without_loss() -> None:
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    old = _migrate(BEFORE)
    Campaign, Problem, Solution = (old.get_model("annotate", name) for name in ("Campaign", "Problem", "Solution"))
    User = old.get_model("auth", "User")
    a, b = Campaign.objects.create(slug="a", name="A"), Campaign.objects.create(slug="b", name="B")
    shared = Problem.objects.create(text="What is $1+1$?", text_sha256="1" * 64, answer="2", source_id="s/1.json")
    only_a = Problem.objects.create(text="What is $2+2$?", text_sha256="2" * 64, answer="4")
    unused = Problem.objects.create(text="What is $3+3$?", text_sha256="3" * 64, answer="6")
    in_a = [Solution.objects.create(campaign=a, problem=shared) for _ in range(2)]
    in_a.append(Solution.objects.create(campaign=a, problem=only_a))
    in_b = Solution.objects.create(campaign=b, problem=shared, final_answer="2")
    User.objects.create(username="admin", password="!imported", is_active=False)  # an imported labeler
    User.objects.create(username="real", password="pbkdf2_sha256$x")

    new = _migrate(leaves)
    Problem, Solution, User = (new.get_model(app, name) for app, name in
                               (("annotate", "Problem"), ("annotate", "Solution"), ("auth", "User")))
    assert Problem.objects.count() == 4
    a_shared = Problem.objects.get(pk=shared.pk)
    assert a_shared.campaign_id == a.pk and Problem.objects.get(pk=only_a.pk).campaign_id == a.pk
    assert Problem.objects.get(pk=unused.pk).campaign_id is None
    copy = Problem.objects.get(campaign_id=b.pk)
    assert (copy.text, copy.answer, copy.source_id, copy.text_sha256) == (
        a_shared.text, "2", "s/1.json", a_shared.text_sha256)
    assert Solution.objects.get(pk=in_b.pk).problem_id == copy.pk
    assert all(Solution.objects.get(pk=s.pk).problem.campaign_id == a.pk for s in in_a)
    assert len({p.key_sha256 for p in Problem.objects.all()}) == 3 and all(p.key_sha256 for p in Problem.objects.all())
    assert set(User.objects.values_list("username", flat=True)) == {"imported:admin", "real"}
