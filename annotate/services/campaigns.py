"""Campaign administration: settings, members, progress, browser imports (who may: ``annotate.permissions``).

The dashboard's figures here run a fixed number of aggregate queries whatever the campaign's size; the
slow quality metrics live in ``agreement`` and are precomputed by a Celery task.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, Q
from django.db.models.functions import TruncHour
from django.utils import timezone

from stepcore.graders import DEFAULT_GRADER, GraderConfigError, get_grader
from stepcore.steps import StepRuleError, check_step_rule
from steplab import jobs
from steplab.jobs import JobStatus

from .. import permissions
from ..models import (
    ERROR_CATEGORY_MAX_CHARS,
    Assignment,
    AssignmentStatus,
    Campaign,
    FinishReason,
    ImportJob,
    ImportKind,
    Invitation,
    Membership,
    Rating,
    Role,
)
from ..scales import ScaleError, scale_from_data
from .campaign_problems import bank_access

if TYPE_CHECKING:
    from .importing import ImportReport


class CampaignAdminError(Exception):
    """A bad admin request; ``field`` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


# --- campaign settings ---------------------------------------------------------------------------------------

CAMPAIGN_FIELDS = ("name", "slug", "mode", "instructions", "overlap", "qc_rate", "screening_pass_threshold",
                   "lease_minutes", "export_interval_minutes", "quality_threshold", "quality_min_items",
                   "pause_below_threshold", "suggestions", "lease_order",
                   "step_rationale", "step_scale", "error_categories", "grader", "grader_config", "step_rule",
                   "auto_train", "auto_train_max_steps")
MAX_ERROR_CATEGORIES = 9
MAX_ERROR_CATEGORY_CHARS = ERROR_CATEGORY_MAX_CHARS  # a category's name fits the rating's column


def check_domain_settings(fields: dict[str, Any]) -> None:
    """The scale, error categories, grader and step rule among ``fields`` are usable; else CampaignAdminError
    naming the field (they are plain data, which nothing else checks before a labeler meets them)."""
    if "step_scale" in fields:
        try:
            scale_from_data(fields["step_scale"])
        except ScaleError as error:
            raise CampaignAdminError("step_scale", str(error)) from None
    if "grader" in fields or "grader_config" in fields:
        try:
            get_grader(fields.get("grader", DEFAULT_GRADER), fields.get("grader_config"))
        except GraderConfigError as error:
            raise CampaignAdminError("grader", str(error)) from None
    if "step_rule" in fields:
        try:
            check_step_rule(fields["step_rule"])
        except ValueError as error:
            raise CampaignAdminError("step_rule", str(error)) from None
    categories = fields.get("error_categories", [])
    if (not isinstance(categories, list) or len(categories) > MAX_ERROR_CATEGORIES
            or not all(isinstance(c, str) and 0 < len(c.strip()) <= MAX_ERROR_CATEGORY_CHARS for c in categories)
            or len({c.strip() for c in categories}) != len(categories)):
        raise CampaignAdminError("error_categories", f"must be at most {MAX_ERROR_CATEGORIES} distinct names of 1 to "
                                                     f"{MAX_ERROR_CATEGORY_CHARS} characters")


@transaction.atomic
def create_campaign(*, creator: User | None, **fields: Any) -> Campaign:
    """A new campaign; its creator (if any: a command may make one for admins named later) becomes an admin
    member so they can manage it without staff rights."""
    if Campaign.objects.filter(slug=fields.get("slug")).exists():
        raise CampaignAdminError("slug", f"a campaign {fields.get('slug')!r} already exists")
    check_domain_settings(fields)
    campaign = Campaign.objects.create(**{k: v for k, v in fields.items() if k in CAMPAIGN_FIELDS})
    if creator is not None:
        Membership.objects.create(campaign=campaign, user=creator, role=Role.ADMIN)
    return campaign


def update_campaign(*, campaign: Campaign, **fields: Any) -> Campaign:
    check_domain_settings(fields)
    if "step_scale" in fields:
        allowed = scale_from_data(fields["step_scale"]).allowed
        stranded = (Rating.objects.filter(assignment__solution__campaign=campaign, rating__isnull=False)
                    .exclude(rating__in=allowed).values_list("rating", flat=True).first())
        if stranded is not None:
            raise CampaignAdminError("step_scale", f"this campaign holds ratings of {stranded}, which the new scale "
                                                   "does not have: keep a scale that has every rated value")
    for key, value in fields.items():
        if key not in CAMPAIGN_FIELDS:
            raise CampaignAdminError(key, "is not a campaign setting")
        setattr(campaign, key, value)
    campaign.save()
    return campaign


def set_archived(campaign: Campaign, archived: bool) -> Campaign:
    """Archiving hides the campaign from labelers; nothing is deleted and it can be restored."""
    Campaign.objects.filter(pk=campaign.pk).update(is_active=not archived, updated_at=timezone.now())
    campaign.is_active = not archived
    return campaign


# --- members -------------------------------------------------------------------------------------------------

#: the answer to "add a member" for anyone not a member yet, whether or not the account exists: an admin
#: learns nothing about other people's accounts from it
INVITED = ("If an account named {username!r} exists and is not a member yet, it has been invited as {role}: it "
           "becomes a member when it accepts the invitation.")


def add_member(campaign: Campaign, username: str, role: str, *, invited_by: Any = None) -> str:
    """Re-role (and reactivate) an existing member at once — they joined before — or invite anyone else, staff
    included: nobody becomes a member without accepting. Returns what to tell the admin."""
    if role not in Role.values:
        raise CampaignAdminError("role", f"must be one of {', '.join(Role.values)}, got {role!r}")
    username = username.strip()
    user = get_user_model().objects.filter(username=username).first()
    if user is not None:
        with transaction.atomic():
            membership = Membership.objects.select_for_update().filter(campaign=campaign, user=user).first()
            if membership is None:
                Invitation.objects.update_or_create(campaign=campaign, user=user,
                                                    defaults={"role": role, "invited_by": invited_by})
            else:
                membership.role, membership.is_active = role, True
                membership.save(update_fields=["role", "is_active"])
                return f"{user.username} is now {role}."
    return INVITED.format(username=username, role=role)


def answer_invitation(*, user: Any, invitation_id: int, accept: bool) -> Membership | None:
    """The invited user's yes (the membership, made or reactivated with the offered role) or no (the offer goes).
    Someone else's invitation is as missing as one that does not exist."""
    with transaction.atomic():
        invitation = Invitation.objects.select_for_update().filter(pk=invitation_id, user=user).first()
        if invitation is None:
            raise CampaignAdminError("invitation", f"no invitation {invitation_id} for you")
        membership = None
        if accept:
            membership, created = Membership.objects.get_or_create(
                campaign=invitation.campaign, user=user, defaults={"role": invitation.role})
            if not created:
                membership.role, membership.is_active = invitation.role, True
                membership.save(update_fields=["role", "is_active"])
        invitation.delete()
    return membership


def set_member_state(membership: Membership, *, is_active: bool | None = None,
                     is_paused: bool | None = None) -> Membership:
    changes: dict[str, Any] = {}
    if is_active is not None:
        changes["is_active"] = is_active
    if is_paused is not None:
        changes["is_paused"] = is_paused
        if not is_paused:
            changes["quality_flagged_at"] = None  # the admin has looked at it
    Membership.objects.filter(pk=membership.pk).update(**changes)
    for key, value in changes.items():
        setattr(membership, key, value)
    return membership


# --- progress ------------------------------------------------------------------------------------------------

@dataclass
class GenerationProgress:
    generation: int | None
    total: int = 0
    todo: int = 0
    in_progress: int = 0
    done: int = 0
    qc: int = 0


@dataclass
class CampaignProgress:
    generations: list[GenerationProgress]
    totals: GenerationProgress
    finish_reasons: dict[str, int]
    labelings_last_24h: int
    labelings_per_hour: list[tuple[datetime, int]] = field(default_factory=list)

    @property
    def per_hour_24h(self) -> float:
        return self.labelings_last_24h / 24


_PROGRESS_SQL = """
WITH per_solution AS (
    SELECT a.solution_id,
           count(*) FILTER (WHERE a.status = 'submitted' AND NOT a.is_gold) AS submitted,
           count(*) FILTER (WHERE a.status = 'leased') AS open
    FROM annotate_assignment a JOIN annotate_solution s2 ON s2.id = a.solution_id
    WHERE s2.campaign_id = %(campaign)s
    GROUP BY a.solution_id
)
SELECT s.generation,
       count(*) AS total,
       count(*) FILTER (WHERE s.is_quality_control OR s.is_screening) AS qc,
       count(*) FILTER (WHERE NOT (s.is_quality_control OR s.is_screening)
                        AND coalesce(p.submitted, 0) >= %(overlap)s) AS done,
       count(*) FILTER (WHERE NOT (s.is_quality_control OR s.is_screening)
                        AND coalesce(p.submitted, 0) < %(overlap)s
                        AND (coalesce(p.open, 0) > 0 OR coalesce(p.submitted, 0) > 0)) AS in_progress
FROM annotate_solution s LEFT JOIN per_solution p ON p.solution_id = s.id
WHERE s.campaign_id = %(campaign)s
GROUP BY s.generation
ORDER BY s.generation NULLS LAST
"""


def campaign_progress(campaign: Campaign, *, now: datetime | None = None) -> CampaignProgress:
    """Solutions total / to do / in progress / done / QC by generation, finish reasons, labelings per hour.

    A regular solution is done once it has ``overlap`` finished labelings; QC and screening solutions are
    counted apart (every labeler sees them). Three queries, whatever the campaign's size.
    """
    now = now or timezone.now()
    generations: list[GenerationProgress] = []
    with connection.cursor() as cursor:
        cursor.execute(_PROGRESS_SQL, {"campaign": campaign.pk, "overlap": campaign.overlap})
        for generation, total, qc, done, in_progress in cursor.fetchall():
            generations.append(GenerationProgress(generation, total, total - qc - done - in_progress,
                                                  in_progress, done, qc))
    totals = GenerationProgress(None)
    for row in generations:
        for key in ("total", "todo", "in_progress", "done", "qc"):
            setattr(totals, key, getattr(totals, key) + getattr(row, key))
    finished = Assignment.objects.filter(solution__campaign=campaign, status=AssignmentStatus.SUBMITTED,
                                         is_gold=False)
    reasons = {reason: 0 for reason in FinishReason.values}
    for reason, count in finished.values_list("finish_reason").annotate(n=Count("id")).order_by():
        reasons[reason] = count
    since = now - timedelta(hours=24)
    hourly = list(finished.filter(finished_at__gte=since).annotate(hour=TruncHour("finished_at"))
                  .values_list("hour").annotate(n=Count("id")).order_by("hour"))
    return CampaignProgress(generations, totals, reasons, sum(n for _, n in hourly), hourly)


def progress_cache_key(campaign: Campaign) -> str:
    # created_at makes the key unique even when a recreated database reuses a primary key
    return f"steplab:manage:progress:{campaign.pk}:{campaign.created_at.timestamp():.6f}"


def cached_campaign_progress(campaign: Campaign, *, fresh: bool = False) -> tuple[CampaignProgress, datetime]:
    """The progress figures and when they were computed, cached for ``STEPLAB_DASHBOARD_CACHE_SECONDS``:
    on a campaign of 100,000 solutions the three aggregates take a few hundred ms, too slow for every view."""
    from django.conf import settings
    from django.core.cache import cache

    key = progress_cache_key(campaign)
    cached = None if fresh else cache.get(key)
    if cached is not None:
        return cached
    value = (campaign_progress(campaign), timezone.now())
    cache.set(key, value, settings.STEPLAB_DASHBOARD_CACHE_SECONDS)
    return value


def member_summaries(campaign: Campaign) -> list[Membership]:
    """Members with their finished labelings and open leases (one query)."""
    done = Count("user__assignments", filter=Q(user__assignments__solution__campaign=campaign,
                                                user__assignments__status=AssignmentStatus.SUBMITTED))
    open_ = Count("user__assignments", filter=Q(user__assignments__solution__campaign=campaign,
                                                 user__assignments__status=AssignmentStatus.LEASED))
    rows = (Membership.objects.filter(campaign=campaign).select_related("user")
            .annotate(done=done, open=open_).order_by("role", "user__username"))
    return list(rows)


# --- browser imports -----------------------------------------------------------------------------------------

PHASE_SPAN = {  # where each importer pass sits on the 0–1 progress bar
    "validate": (0.0, 0.45),
    "check": (0.45, 0.55),
    "import": (0.55, 1.0),
}


def count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(1 for _ in handle)


@transaction.atomic
def create_import_job(campaign: Campaign, *, kind: str, upload: UploadedFile, user: User,
                      skip_invalid: bool = False, split_rule: str = "auto",
                      generation: int | None = None, label_source: str = "") -> ImportJob:
    """Store the upload and queue the import (the task is sent once the job row is committed); ``NotAllowed``
    unless ``user`` may import into the campaign."""
    permissions.require(permissions.can_import, user, campaign,
                        f"only staff and admins of campaign {campaign.slug} import")
    if kind not in ImportKind.values:
        raise CampaignAdminError("kind", f"must be one of {', '.join(ImportKind.values)}, got {kind!r}")
    if kind == ImportKind.SOLUTIONS:  # empty: the campaign's own step rule, which must be usable too
        try:
            check_step_rule(split_rule or campaign.step_rule)
        except StepRuleError as error:
            raise CampaignAdminError("split_rule", str(error) if split_rule else
                                     f"the campaign's {error}; choose a rule for this import") from None
    if not upload.size:
        raise CampaignAdminError("file", "is empty")
    label_source = label_source.strip()
    if kind == ImportKind.MACHINE_LABELS and not label_source:
        raise CampaignAdminError("label_source", "name the machine labels' source (e.g. math-shepherd-7b)")
    job = ImportJob(campaign=campaign, kind=kind, original_name=upload.name or "upload.jsonl",
                    skip_invalid=skip_invalid, split_rule=split_rule, generation=generation, created_by=user,
                    label_source=label_source if kind == ImportKind.MACHINE_LABELS else "")
    job.file.save(Path(upload.name or "upload.jsonl").name, upload, save=False)
    job.save()
    jobs.dispatch_on_commit(job)
    return job


def import_solutions_now(campaign: Campaign, *, path: Path, user: permissions.Actor, skip_invalid: bool = False,
                         split_rule: str | None = None, generation: int | None = None) -> ImportReport:
    """The API's solutions import, answered in the request: the page's rule (``can_import``) and the staff bank's
    rule for ``user``, as an import job applies them; ``ImportFailed`` carries the report of a refused file."""
    from .problems import import_solutions

    permissions.require(permissions.can_import, user, campaign,
                        f"only staff and admins of campaign {campaign.slug} import")
    with bank_access(user):
        return import_solutions(path, campaign, skip_invalid=skip_invalid, split_rule=split_rule,
                                generation=generation)


def dispatch_pending_imports(*, older_than: timedelta = timedelta(seconds=30)) -> list[int]:
    """Send the imports whose task never reached the broker (it was down when they were uploaded)."""
    return jobs.dispatch_pending(ImportJob, older_than=older_than)


IMPORT_JOB_LOCK_CLASS = 0x5374_4A42  # "StJB": the advisory-lock namespace of import jobs


def _claim_job(job_id: int) -> ImportJob | None:
    """Take a job for this execution, inside the transaction that will hold its import (after ``jobs.claim``).

    A job already running is taken again only when no live execution holds its advisory lock: its worker died
    mid-import (SIGKILL, OOM), its transaction was rolled back with the connection, and Celery redelivered the
    task (acks_late + reject_on_worker_lost) — so the import runs again instead of the job staying "running"
    for ever. A finished job is never taken again.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [IMPORT_JOB_LOCK_CLASS, job_id])
            if not cursor.fetchone()[0]:
                return None  # another execution of the same job is alive
    job = ImportJob.objects.select_related("campaign").get(pk=job_id)
    return job if job.status == JobStatus.RUNNING else None


def run_import_job(job_id: int) -> ImportJob | None:
    """Run an uploaded import through the same services (and validation) as the management commands."""
    # Queued → running committed at once (pollers see it; the import's own transaction must not hold the
    # row's lock, or its progress writes would wait on it). A redelivered job is already running: see below.
    jobs.claim(ImportJob, job_id)
    try:
        # One transaction holds the import, the job's final status and the job's lock: "running" in the table
        # always means that nothing of the job is committed yet.
        with transaction.atomic():
            job = _claim_job(job_id)
            if job is None:
                return None
            _run_claimed_job(job)
    except DatabaseError as error:  # the import's transaction itself failed (SQLite: "database is locked")
        job = ImportJob.objects.get(pk=job_id)
        jobs.finish(job, JobStatus.FAILED, error=f"the import's transaction failed, nothing was imported: "
                                                 f"{type(error).__name__}: {error}")
    finally:
        jobs.close_progress_connection()
    job.refresh_from_db()
    # Only now that the job's end is committed: a worker killed before this point gets the task redelivered,
    # and the redelivery needs the file.
    delete_import_file(job)
    return job


def delete_import_file(job: ImportJob) -> None:
    """A finished job's upload is not kept (its report keeps the rejected lines): uploads would fill the disk."""
    if not job.file.name:
        return
    job.file.storage.delete(job.file.name)  # a file already gone is no error
    ImportJob.objects.filter(pk=job.pk).update(file="")
    job.file.name = ""


IMPORT_UPLOADS = "imports"


def sweep_import_files(*, older_than: timedelta = timedelta(hours=6)) -> int:
    """Beat: delete what ``run_import_job`` did not — uploads of finished jobs (a worker lost between the
    commit and the deletion) and files no job names (its request failed after the file was stored, or its
    campaign was deleted) once they are older than ``older_than`` (an upload being stored is younger)."""
    deleted = 0
    finished = ImportJob.objects.filter(status__in=jobs.FINAL_STATUSES).exclude(file="")
    for job in finished.iterator():
        delete_import_file(job)
        deleted += 1
    storage = ImportJob._meta.get_field("file").storage
    named = set(ImportJob.objects.exclude(file="").values_list("file", flat=True))
    cutoff = timezone.now() - older_than
    folders = [IMPORT_UPLOADS]
    while folders:
        folder = folders.pop()
        try:
            subfolders, files = storage.listdir(folder)
        except FileNotFoundError:
            continue
        folders.extend(f"{folder}/{name}" for name in subfolders)
        for name in files:
            path = f"{folder}/{name}"
            if path not in named and storage.get_modified_time(path) < cutoff:
                storage.delete(path)
                deleted += 1
    return deleted


def _run_claimed_job(job: ImportJob) -> None:
    from .importing import ImportFailed, ImportReport
    from .machine_labels import import_machine_labels
    from .prm800k_import import import_prm800k
    from .problems import import_problems, import_solutions

    path = Path(job.file.path)
    total = max(count_lines(path), 1)
    last = {"value": 0.0}
    _write_progress(job.pk, "validate", 0.0, total_lines=total)

    def progress(phase: str, line: int) -> None:
        start, end = PHASE_SPAN.get(phase, (0.0, 1.0))
        value = min(1.0, start + (end - start) * min(line, total) / total)
        if value - last["value"] >= 0.01:
            last["value"] = value
            _write_progress(job.pk, phase, value)

    report: ImportReport
    status, error = JobStatus.SUCCEEDED, ""
    try:
        with transaction.atomic(), bank_access(permissions.actor_for(job.created_by)):
            # a savepoint: a database error leaves the job's transaction usable
            if job.kind == ImportKind.PROBLEMS:
                report = import_problems(path, job.campaign, skip_invalid=job.skip_invalid, progress=progress)
            elif job.kind == ImportKind.SOLUTIONS:
                report = import_solutions(path, job.campaign, skip_invalid=job.skip_invalid,
                                          split_rule=job.split_rule or None, generation=job.generation,
                                          progress=progress)
            elif job.kind == ImportKind.MACHINE_LABELS:
                report = import_machine_labels(path, job.campaign, source=job.label_source,
                                               skip_invalid=job.skip_invalid, progress=progress)
            else:
                report = import_prm800k(path, job.campaign, skip_invalid=job.skip_invalid, progress=progress)
    except ImportFailed as failed:
        report, status = failed.report, JobStatus.FAILED
        error = (f"{report.rejected_count} invalid line(s); nothing was imported "
                 "(tick “skip invalid lines” to import the valid ones)")
    except Exception as exc:  # noqa: BLE001 — the job must record any failure, the worker keeps running
        report, status, error = ImportReport(file=job.original_name), JobStatus.FAILED, f"{type(exc).__name__}: {exc}"
    jobs.finish(job, status, error=error, progress=1.0, phase="done", total_lines=total, lines=report.lines,
                imported=report.imported, rejected_count=report.rejected_count, created=report.created,
                rejected=[{"line": r.line, "field": r.field, "message": r.message} for r in report.rejected])


def _write_progress(job_id: int, phase: str, value: float, *, total_lines: int | None = None) -> None:
    """Through the progress connection: pollers see it while the import's transaction is still open."""
    values: dict[str, Any] = {"progress": value, "phase": phase}
    if total_lines is not None:
        values["total_lines"] = total_lines
    jobs.write_progress(ImportJob, job_id, **values)
