"""Labelers writing at once on a SQLite file, as the demo's threaded server and its workers do; run by
``test_sqlite_writers.py`` in a process of its own (``DATABASE_URL`` names the file). Prints one JSON line:
the errors the labelers met and how many solutions they labeled."""
from __future__ import annotations

import json
import threading
from typing import Any

import django

LABELERS = 4
ROUNDS = 10


def main() -> None:
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connections

    from annotate.models import Campaign, Membership, Role
    from annotate.services import labeling, leases
    from tests.factories import solution_with_steps

    call_command("migrate", interactive=False, verbosity=0)
    campaign = Campaign.objects.create(slug="writers", name="Writers", overlap=1)
    for _ in range(LABELERS * ROUNDS):
        solution_with_steps(campaign, ["One.", "Two."])
    people = [get_user_model().objects.create_user(username=f"writer{n}") for n in range(LABELERS)]
    for person in people:
        Membership.objects.create(campaign=campaign, user=person, role=Role.LABELER)
    errors: list[str] = []
    labeled: list[int] = []
    start = threading.Barrier(LABELERS)

    def label(person: Any) -> None:
        try:
            start.wait(timeout=60)
            for _ in range(ROUNDS):
                assignment = leases.lease_next_solution(campaign, user=person).assignment
                assert assignment is not None
                labeling.record_rating(assignment.pk, user=person, step_index=0, rating=-1)
                labeling.submit_assignment(assignment.pk, user=person)
                labeled.append(assignment.pk)
        except Exception as error:  # noqa: BLE001 — every failure is the finding, reported below
            errors.append(repr(error))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=label, args=(person,)) for person in people]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({"errors": errors, "labeled": len(labeled), "distinct": len(set(labeled))}))


if __name__ == "__main__":
    main()
