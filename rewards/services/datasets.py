"""Dataset versions: every format of a campaign's labels, written once, hashed, published atomically.

How a version becomes visible: all files are streamed to a private temporary folder
(``STEPLAB_EXPORT_TMP_DIR``), hashed while written, copied into Django's default storage under a
content-addressed folder (``datasets/<slug>/<content hash>/``), and only then is the
``DatasetVersion`` row created, in one transaction. Every reader (API, pages, jobs) goes through that
row, so a worker killed at any point leaves nothing visible: at worst a temporary folder or an
unreferenced storage folder that the next run of the same content overwrites. A storage that fails (an
S3 endpoint down, a missing bucket) raises ``DatasetStorageError`` naming the file, before any row exists.

Unchanged content: ``create_dataset_version`` returns ``None`` (and creates nothing) when the new
export's ``content_sha256`` (spec + hash of every data file) equals the campaign's latest version's.
The periodic task first compares a cheap label *watermark* and skips the export altogether.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.db.models import Count, Max, Q
from django.template.loader import render_to_string
from django.utils import timezone

from annotate.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignMetrics,
    MachineLabel,
    Rating,
    Solution,
    StepDecision,
)
from annotate.scales import campaign_scale
from rewards.exports import (
    ExportOptions,
    StepwiseRows,
    WrittenFile,
    iter_format_rows,
    iter_prm800k_and_stepwise_rows,
    iter_stepwise_groups,
    labeled_assignments,
    resolve_steps,
    write_paired_rows,
    write_rows_multi,
)
from rewards.formats import registry as formats
from rewards.jobs.models import Candidate
from rewards.models import DatasetVersion
from rewards.services.downloads import read_file
from stepcore.graders import get_grader
from steplab import events

try:  # the s3 extra: what boto3 raises for an unreachable endpoint, a missing bucket or a refused request
    from botocore.exceptions import BotoCoreError, ClientError

    STORAGE_ERRORS: tuple[type[Exception], ...] = (OSError, BotoCoreError, ClientError)
except ImportError:
    STORAGE_ERRORS = (OSError,)

logger = logging.getLogger(__name__)

CARD = ("card", "README.md")
#: the formats one shared database pass writes (PRM800K and TRL stepwise together, then outcome), counted for
#: the card as they stream; every other registered format is written after them, through its own ``rows``
SHARED_PASS = ("prm800k", "trl-stepwise", "outcome")
KNOWN_LICENSES = {"prm800k": "MIT (OpenAI PRM800K)", "math": "MIT (MATH, Hendrycks et al.)"}


class DatasetError(Exception):
    """A snapshot that cannot be made; the message names what is wrong."""


class DatasetStorageError(DatasetError):
    """The dataset storage failed (unreachable, no such bucket, access denied); names the file and the cause."""


def spec_of(options: ExportOptions) -> dict[str, Any]:
    """The filter spec stored on a version: every export option, JSON-ready."""
    spec = dataclasses.asdict(options)
    for key, value in spec.items():
        if isinstance(value, tuple):
            spec[key] = list(value)
    spec["split"] = {"by": "problem", "seed": options.seed, "test_fraction": options.test_fraction}
    return spec


def label_watermark(campaign: Campaign) -> dict[str, Any]:
    """A cheap fingerprint of the campaign's labels: changes whenever a labeling is finished or edited."""
    finished = Assignment.objects.filter(solution__campaign=campaign, status=AssignmentStatus.SUBMITTED)
    a = finished.aggregate(n=Count("id"), last=Max("updated_at"))
    r = Rating.objects.filter(assignment__in=finished).aggregate(n=Count("id"), last=Max("updated_at"))
    d = StepDecision.objects.filter(assignment__in=finished).aggregate(last=Max("updated_at"))
    s = Solution.objects.filter(campaign=campaign).aggregate(n=Count("id"),
                                                             correct=Count("id", filter=Q(is_correct=True)))
    m = MachineLabel.objects.filter(solution__campaign=campaign).aggregate(n=Count("id"), last=Max("created_at"))
    # the outcome rows hold the pools' graded candidates
    pooled = Candidate.objects.filter(pool_problem__pool__campaign=campaign).aggregate(n=Count("id"), last=Max("id"))

    def iso(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    return {"assignments": a["n"], "assignments_at": iso(a["last"]), "ratings": r["n"],
            "ratings_at": iso(r["last"]), "decisions_at": iso(d["last"]), "solutions": s["n"],
            "correct": s["correct"], "machine_labels": m["n"], "machine_labels_at": iso(m["last"]),
            "pool_candidates": pooled["n"], "pool_candidates_last": pooled["last"]}


_code_version: str | None = None


def code_version() -> str:
    """``STEPLAB_CODE_VERSION``, else the git commit of this checkout, else the package version."""
    global _code_version
    if _code_version is None:
        value = settings.STEPLAB_CODE_VERSION
        if not value:
            try:
                value = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=settings.BASE_DIR,
                                       capture_output=True, text=True, timeout=5, check=True).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                value = ""
        if not value:
            from importlib.metadata import PackageNotFoundError, version

            try:
                value = "steplab " + version("steplab")
            except PackageNotFoundError:
                value = "unknown"
        _code_version = value[:64]
    return _code_version


@dataclass
class _Tally:
    """Label distribution and split sizes gathered while the rows stream past. Both step modes are counted
    (``modes``: labeled steps and negatives that ``chosen`` and ``alternatives`` yield), whichever is written."""

    steps: str
    labels: Counter[str] = field(default_factory=Counter)
    step_ratings: Counter[str] = field(default_factory=Counter)
    rows: Counter[str] = field(default_factory=Counter)
    problems: dict[str, set[str]] = field(default_factory=lambda: {"train": set(), "test": set()})
    modes: dict[str, Counter[str]] = field(default_factory=lambda: {"chosen": Counter(), "alternatives": Counter()})
    #: right and wrong answers of the outcome rows per source (labeled, imported, sampled, pool)
    outcome_sources: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def stepwise(self, groups: Iterator[StepwiseRows]) -> Iterator[dict[str, Any]]:
        for group in groups:
            yield from self.count_stepwise(group)

    def count_stepwise(self, group: StepwiseRows | None) -> list[dict[str, Any]]:
        """Count a labeling's rows in both modes; returns the rows of the mode being written."""
        if group is None:
            return []
        if group.chosen is not None:
            steps, negatives = len(group.chosen["labels"]), group.chosen["labels"].count(False)
            for mode in ("chosen", "alternatives"):
                self.modes[mode].update(rows=1, steps=steps, negatives=negatives)
        for row in group.alternatives:  # each adds one labeled step: its last (the prefix is the chosen path's)
            self.modes["alternatives"].update(rows=1, steps=1, negatives=0 if row["labels"][-1] else 1)
        written = group.rows(self.steps)
        for row in written:
            self.labels.update("true" if v else "false" for v in row["labels"])
            self.step_ratings.update(str(v) for v in row["ratings"])
            self.rows[f"stepwise:{row['split']}"] += 1
            self.problems[row["split"]].add(row["problem_id"])
        return written

    def paired(self, pairs: Iterator[tuple[dict[str, Any], StepwiseRows | None]]
               ) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
        for row, group in pairs:
            yield row, self.count_stepwise(group)

    def outcome(self, rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            verdict = "correct" if row["label"] else "wrong"
            self.rows[f"outcome:{row['split']}"] += 1
            self.rows[f"outcome:{verdict}"] += 1
            self.outcome_sources[row["source"]][verdict] += 1
            yield row


def _database_counts(campaign: Campaign, options: ExportOptions, *, in_thread: bool) -> dict[str, Any]:
    """The aggregates of the card that the database computes (2-3 s on 1M ratings). Run in a thread, on its own
    connection, while the main thread streams the files: PostgreSQL works while Python writes."""
    try:
        labeled = labeled_assignments(campaign, options)
        base = labeled.aggregate(assignments=Count("id"), solutions=Count("solution_id", distinct=True),
                                 problems=Count("solution__problem_id", distinct=True),
                                 # no verdict: no answer reached, or no ground truth to grade it against
                                 solutions_ungraded=Count("solution_id", distinct=True,
                                                          filter=Q(solution__is_correct__isnull=True)))
        by_value = dict(Rating.objects.filter(assignment__in=labeled, completion__index=0).values_list("rating")
                        .annotate(n=Count("id")).values_list("rating", "n"))
        steps = Rating.objects.filter(assignment__in=labeled).values("completion__step_id").distinct().count()
        return {"base": base, "by_value": by_value, "steps": steps}
    finally:
        if in_thread:
            connection.close()  # the thread's own connection


def _counts(database: dict[str, Any], tally: _Tally, written: dict[str, WrittenFile]) -> dict[str, Any]:
    base, by_value, steps = database["base"], database["by_value"], database["steps"]
    return {
        **base,
        "steps": steps,
        "ratings": {"negative": by_value.get(-1, 0), "neutral": by_value.get(0, 0),
                    "positive": by_value.get(1, 0), "unrated": by_value.get(None, 0)},
        "stepwise_labels": {"true": tally.labels["true"], "false": tally.labels["false"]},
        "stepwise_ratings": {"negative": tally.step_ratings["-1"], "neutral": tally.step_ratings["0"],
                             "positive": tally.step_ratings["1"]},
        "step_mode": tally.steps,
        "step_modes": {mode: {"rows": counter["rows"], "labeled_steps": counter["steps"],
                              "negatives": counter["negatives"]} for mode, counter in tally.modes.items()},
        "rows": {key: file.rows for key, file in written.items()},
        "split": {
            name: {"problems": len(tally.problems[name]), "stepwise_rows": tally.rows[f"stepwise:{name}"],
                   "outcome_rows": tally.rows[f"outcome:{name}"]}
            for name in ("train", "test")
        },
        "outcome": {"correct": tally.rows["outcome:correct"], "wrong": tally.rows["outcome:wrong"],
                    "by_source": {source: {"correct": counter["correct"], "wrong": counter["wrong"]}
                                  for source, counter in sorted(tally.outcome_sources.items())}},
    }


def agreement_figures(campaign: Campaign) -> dict[str, Any] | None:
    """Inter-annotator agreement (each figure with its item count) from the campaign's latest quality-metrics
    snapshot, which a Celery task computes (annotate.services.agreement); None before the first snapshot —
    recomputing it here would load every labeling into memory during a streaming export."""
    metrics = CampaignMetrics.objects.filter(campaign=campaign).first()
    if metrics is None:
        return None
    return {"computed_at": metrics.computed_at.isoformat(), **metrics.data.get("inter_annotator", {}),
            **({"machine_sources": metrics.data["machine_agreement"]} if metrics.data.get("machine_agreement")
               else {})}


def _licenses(campaign: Campaign) -> list[dict[str, Any]]:
    sources = (Solution.objects.filter(campaign=campaign).values_list("provenance__source", "provenance__license")
               .annotate(n=Count("id")).order_by("provenance__source"))
    found = []
    for source, license_name, n in sources:
        name = str(source or "unknown")
        found.append({"source": name, "solutions": n,
                      "license": license_name or KNOWN_LICENSES.get(name.lower(), "see the source's terms")})
    return found


def _card(campaign: Campaign, spec: dict[str, Any], counts: dict[str, Any], content: str,
          written: dict[str, WrittenFile], names: dict[str, str]) -> str:
    """The README.md dataset card. Deterministic (no dates): a retried export has the same hash."""
    agreement = agreement_figures(campaign)
    return render_to_string("rewards/dataset_card.md", {
        "campaign": campaign, "spec": json.dumps(spec, indent=2, sort_keys=True), "counts": counts,
        "neutral": spec["neutral"],
        "content_sha256": content, "code_version": code_version(), "agreement": agreement,
        "agreement_json": json.dumps(agreement, indent=2, sort_keys=True, default=str),
        "files": [(key, names[key], f) for key, f in written.items()],
        "license": settings.STEPLAB_DATASET_LICENSE, "licenses": _licenses(campaign),
        "domain": domain_of(campaign),
    })


def domain_of(campaign: Campaign) -> dict[str, Any]:
    """What the card records of the campaign's domain: its label scale (with each value's training polarity),
    error categories, outcome grader and step rule."""
    return {"scale": campaign_scale(campaign).as_data(), "error_categories": campaign.error_categories,
            "grader": get_grader(campaign.grader, campaign.grader_config).describe(), "step_rule": campaign.step_rule}


def content_hash(spec: dict[str, Any], written: dict[str, WrittenFile]) -> str:
    payload = {"spec": spec, "files": {key: file.sha256 for key, file in sorted(written.items())}}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _latest(campaign: Campaign) -> DatasetVersion | None:
    return DatasetVersion.objects.filter(campaign=campaign, status=DatasetVersion.Status.READY).order_by(
        "-number").first()


def _publish(local: Path, name: str) -> None:
    """Copy one finished file into storage under exactly ``name`` (a leftover from a killed run is replaced)."""
    try:
        if default_storage.exists(name):
            default_storage.delete(name)
        with open(local, "rb") as handle:
            saved = default_storage.save(name, File(handle, name=Path(name).name))
    except STORAGE_ERRORS as exc:
        raise DatasetStorageError(f"could not write {name} to the dataset storage: {exc}") from exc
    if saved != name:
        raise DatasetError(f"storage saved {name!r} as {saved!r}; dataset files need their exact names")


def _clean_stale_temp(root: Path, max_age_s: float = 24 * 3600) -> None:
    cutoff = time.time() - max_age_s
    for child in root.glob("export-*"):
        try:
            if child.stat().st_mtime < cutoff:
                shutil.rmtree(child, ignore_errors=True)
        except OSError:
            continue


def create_dataset_version(campaign: Campaign, *, options: ExportOptions | None = None,
                           user: User | None = None) -> DatasetVersion | None:
    """Snapshot ``campaign`` in every format; ``None`` when the content equals the latest version's."""
    options = resolve_steps(campaign, options or ExportOptions())
    spec = spec_of(options)
    watermark = label_watermark(campaign)
    tmp_root = Path(settings.STEPLAB_EXPORT_TMP_DIR)
    tmp_root.mkdir(parents=True, exist_ok=True)
    _clean_stale_temp(tmp_root)
    work = Path(tempfile.mkdtemp(prefix=f"export-{campaign.slug}-", dir=tmp_root))
    # Inside a transaction a thread's own connection would not see its rows: count inline then.
    counting = None if connection.in_atomic_block else ThreadPoolExecutor(1, thread_name_prefix="export-counts")
    database_counts = counting.submit(_database_counts, campaign, options, in_thread=True) if counting else None
    try:
        tally = _Tally(options.steps)
        written: dict[str, WrittenFile] = {}
        figures: dict[str, Any] = {}
        names: dict[str, str] = {}

        def outs(fmt: str) -> list[Path]:
            files = formats.get(fmt).files
            names.update((file.key, file.name) for file in files)
            return [work / file.name for file in files]

        prm_outs, stepwise_outs, outcome_outs = outs("prm800k"), outs("trl-stepwise"), outs("outcome")
        if options.labels == "raw":  # one database pass feeds both files (see iter_prm800k_and_stepwise_rows)
            prm, stepwise = write_paired_rows(tally.paired(iter_prm800k_and_stepwise_rows(campaign, options)),
                                              (prm_outs, "prm800k"), (stepwise_outs, "trl-stepwise"))
        else:
            stepwise = write_rows_multi(tally.stepwise(iter_stepwise_groups(labeled_assignments(campaign, options),
                                                                            options, scale=campaign_scale(campaign))),
                                        stepwise_outs, "trl-stepwise")
            prm = write_rows_multi(iter_format_rows(campaign, "prm800k", options), prm_outs, "prm800k")
        outcome = write_rows_multi(tally.outcome(iter_format_rows(campaign, "outcome", options)), outcome_outs,
                                   "outcome")
        for fmt, shared in (("prm800k", prm), ("trl-stepwise", stepwise), ("outcome", outcome)):
            written.update(zip((file.key for file in formats.get(fmt).files), shared, strict=True))
        for other in formats.formats():
            if other.name in SHARED_PASS or not other.files or not other.in_version(campaign):
                continue
            others = write_rows_multi(other.rows(campaign, options, figures), outs(other.name), other.name)
            written.update(zip((file.key for file in other.files), others, strict=True))
        content = content_hash(spec, written)
        latest = _latest(campaign)
        if latest is not None and latest.content_sha256 == content:
            return None
        counts = _counts(database_counts.result() if database_counts else
                         _database_counts(campaign, options, in_thread=False), tally, written)
        counts.update(figures)  # what the other formats counted (the consensus' sources and steps)
        card_path = work / CARD[1]
        card_bytes = _card(campaign, spec, counts, content, written, names).encode("utf-8")
        card_path.write_bytes(card_bytes)
        written[CARD[0]] = WrittenFile(card_path, 0, hashlib.sha256(card_bytes).hexdigest(), len(card_bytes))
        names[CARD[0]] = CARD[1]
        folder = f"datasets/{campaign.slug}/{content[:20]}"
        for key, file in written.items():
            _publish(file.path, f"{folder}/{names[key]}")
        files = {key: {"name": f"{folder}/{names[key]}", "sha256": file.sha256, "bytes": file.size,
                       "rows": file.rows} for key, file in written.items()}
        with transaction.atomic():
            Campaign.objects.select_for_update().filter(pk=campaign.pk).first()  # serialise numbering
            latest = _latest(campaign)
            if latest is not None and latest.content_sha256 == content:
                return None
            number = (DatasetVersion.objects.filter(campaign=campaign).aggregate(n=Max("number"))["n"] or 0) + 1
            version = DatasetVersion.objects.create(
                campaign=campaign, number=number, status=DatasetVersion.Status.READY, created_by=user,
                spec=spec, counts=counts, content_sha256=content, code_version=code_version(), folder=folder,
                files=files, watermark=watermark,
            )
            events.emit_on_commit(events.Name.DATASET_VERSION_READY, campaign_id=campaign.pk,
                                  data={"version": version.pk, "number": number, "content_sha256": content,
                                        "files": {key: {"sha256": f["sha256"], "bytes": f["bytes"]}
                                                  for key, f in files.items()}})
            return version
    finally:
        if counting is not None:
            counting.shutdown(wait=True)
        shutil.rmtree(work, ignore_errors=True)


def local_file(version: DatasetVersion, fmt: str, cache_dir: Path) -> Path:
    """One of the version's files as a local path, for readers that need one (the trainer, its job config).

    A file-system storage gives its own path. Any other (S3) has none: the file is downloaded once into
    ``cache_dir/<sha256>/<name>``, checked against the SHA-256 recorded on the version, and only then renamed
    into place, so a path that exists holds exactly the version's bytes."""
    name = version.file_name(fmt)
    try:
        return Path(default_storage.path(name))
    except NotImplementedError:
        pass
    info = version.files[fmt]
    target = cache_dir / str(info["sha256"]) / PurePosixPath(name).name
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    handle, partial_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    partial = Path(partial_name)
    try:
        with os.fdopen(handle, "wb") as out:
            for chunk in read_file(name, 0, int(info["bytes"])):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != info["sha256"]:
            raise DatasetStorageError(f"{name} in the dataset storage has SHA-256 {digest.hexdigest()}, "
                                      f"but {version} recorded {info['sha256']}")
        os.replace(partial, target)
    except STORAGE_ERRORS as exc:
        raise DatasetStorageError(f"could not read {name} from the dataset storage: {exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    return target


def campaigns_due(now: datetime | None = None) -> list[Campaign]:
    """Active campaigns whose export interval has elapsed and whose labels moved since the last version."""
    now = now or timezone.now()
    due = []
    for campaign in Campaign.objects.filter(is_active=True, export_interval_minutes__gt=0).order_by("pk"):
        latest = _latest(campaign)
        if latest is None:
            if Assignment.objects.filter(solution__campaign=campaign, status=AssignmentStatus.SUBMITTED).exists():
                due.append(campaign)
            continue
        elapsed = (now - latest.created_at).total_seconds() / 60
        if elapsed >= campaign.export_interval_minutes and label_watermark(campaign) != latest.watermark:
            due.append(campaign)
    return due
