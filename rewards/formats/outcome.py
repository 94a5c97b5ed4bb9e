"""``outcome``: one row per graded solution of the campaign, whatever made it; what an ORM trains on.

The paper's ORM learns from every graded sample of the generator, not from the human-labeled solutions only (a
labeled set of mostly correct solutions starves it of wrong answers). So the rows are, each with its ``source``:

* ``labeled`` — a solution with a finished labeling (the labeled rows of the stepwise formats);
* ``imported`` — a campaign solution without one (an imported solution file, the labeling queue);
* ``sampled`` — a candidate of a pool a sampling job drew, ``pool`` — of any other candidate pool of the campaign.

A solution is graded when it has a verdict; a pool candidate when its problem has a ground truth. A pool
candidate that a labeling round turned into a solution is that solution's row, once; a candidate whose problem,
position and text another pool already gave (a comparison's subset copies its pool) is not repeated, while two
samples of one pool that read alike stay two rows, as the generator drew them. The filters of
``ExportOptions`` apply as in the other training formats (QC and screening solutions left out unless asked;
``generations`` keeps the solutions of those generations and no pool). Before 2026-12-07 the format held the
labeled solutions only: ``--sources labeled`` writes those rows (with the two new columns).
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from annotate.models import Campaign, Solution
from rewards.exports import ExportOptions, labeled_assignments, solution_paths, split_of

from .registry import Format, VersionFile, register

SOURCES = ("labeled", "imported", "sampled", "pool")
CHUNK = 2000


def problem_id_of(source_id: str, text_sha256: str) -> str:
    """A problem's id in every export row: its source id, else the head of its text's digest."""
    return source_id or text_sha256[:16]


def pool_problem_ids(pool: Any) -> list[str]:
    """The ids, as the export writes them, of a candidate pool's problems (what a comparison's ORM leaves out)."""
    return sorted({problem_id_of(source_id, digest) for source_id, digest in
                   pool.problems.values_list("problem__source_id", "problem__text_sha256")})


def _chosen(sources: Sequence[str] | None) -> tuple[str, ...]:
    if not sources:
        return SOURCES
    unknown = [name for name in sources if name not in SOURCES]
    if unknown:
        raise ValueError(f"outcome: unknown source {unknown[0]!r}; expected some of {', '.join(SOURCES)}")
    return tuple(sources)


def _row(prompt: str, completion: str, label: bool, digest: str, source_id: str, options: ExportOptions,
         **ids: Any) -> dict[str, Any]:
    return {"prompt": prompt, "completion": completion, "label": label,
            "split": split_of(digest, options.seed, options.test_fraction),
            "problem_id": problem_id_of(source_id, digest), **ids}


def _solution_rows(campaign: Campaign, options: ExportOptions, chosen: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    labeled = set(labeled_assignments(campaign, options).values_list("solution_id", flat=True))
    solutions = Solution.objects.filter(campaign=campaign, is_correct__isnull=False)
    if not options.include_qc:
        solutions = solutions.filter(is_quality_control=False, is_screening=False)
    if options.generations is not None:
        solutions = solutions.filter(generation__in=options.generations)
    # ids first, then chunks by id: an ``IN (subquery)`` per chunk made PostgreSQL rebuild the set for every chunk
    ids = sorted(pk for pk in solutions.values_list("pk", flat=True)
                 if ("labeled" if pk in labeled else "imported") in chosen)
    for start in range(0, len(ids), CHUNK):
        chunk = list(Solution.objects.filter(pk__in=ids[start:start + CHUNK]).order_by("pk").values_list(
            "pk", "pre_generated_steps", "is_correct", "problem__text", "problem__text_sha256", "problem__source_id"))
        paths = solution_paths([row[0] for row in chunk if not row[1]])
        for pk, pre_generated, is_correct, prompt, digest, source_id in chunk:
            yield _row(prompt, "\n".join(pre_generated or paths.get(pk, [])), bool(is_correct), digest, source_id,
                       options, source="labeled" if pk in labeled else "imported", solution_id=pk, candidate_id=None)


def _candidate_rows(campaign: Campaign, options: ExportOptions, chosen: tuple[str, ...]
                    ) -> Iterator[dict[str, Any]]:
    from rewards.jobs.models import Candidate, CandidatePool

    pools = CandidatePool.objects.filter(campaign=campaign).order_by("pk").values_list("pk", "sampling_job")
    seen: set[bytes] = set()
    for pool_id, sampled in pools:
        source = "sampled" if sampled is not None else "pool"
        if source not in chosen:
            continue
        candidates = (Candidate.objects.filter(pool_problem__pool_id=pool_id, solution__isnull=True)
                      .exclude(pool_problem__problem__answer__isnull=True)
                      .exclude(pool_problem__problem__answer="").order_by("pool_problem__index", "index"))
        ids = list(candidates.values_list("pk", flat=True))
        for start in range(0, len(ids), CHUNK):
            chunk = Candidate.objects.filter(pk__in=ids[start:start + CHUNK]).order_by(
                "pool_problem__index", "index").values_list(
                "pk", "index", "steps", "text", "is_correct", "pool_problem__problem_id",
                "pool_problem__problem__text", "pool_problem__problem__text_sha256", "pool_problem__problem__source_id")
            for pk, index, steps, text, is_correct, problem, prompt, digest, source_id in chunk:
                completion = "\n".join(steps) if steps else text
                # a subset's copy keeps its candidate's problem, position and text; two samples alike are two rows
                key = hashlib.sha256(f"{problem}\x00{index}\x00{completion}".encode()).digest()
                if key in seen:
                    continue
                seen.add(key)
                yield _row(prompt, completion, bool(is_correct), digest, source_id, options, source=source,
                           solution_id=None, candidate_id=pk)


def rows(campaign: Campaign, options: ExportOptions, figures: dict[str, Any] | None = None, *,
         sources: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
    chosen = _chosen(sources)
    parts: Iterable[Iterator[dict[str, Any]]] = (_solution_rows(campaign, options, chosen),)
    if options.generations is None:
        parts = (*parts, _candidate_rows(campaign, options, chosen))
    for part in parts:
        yield from part


def schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        ("prompt", pa.string()), ("completion", pa.string()), ("label", pa.bool_()), ("split", pa.string()),
        ("problem_id", pa.string()), ("source", pa.string()), ("solution_id", pa.int64()),
        ("candidate_id", pa.int64()),
    ])


register(Format(name="outcome", rows=rows,
                help="every graded solution of the campaign (labeled, imported, sampled and pool candidates), one "
                     "row each with its source and problem_id (an ORM's data)", parquet_schema=schema,
                files=(VersionFile("outcome", "outcome.jsonl"), VersionFile("outcome-parquet", "outcome.parquet")),
                trains="orm", options=("sources",)))
