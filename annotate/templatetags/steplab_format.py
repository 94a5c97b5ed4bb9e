"""Template filters that turn stored values into what a person reads: durations, enum labels, quality figures."""
from __future__ import annotations

from typing import Any

from django import template
from django.db.models import TextChoices
from django.utils.html import format_html
from django.utils.safestring import SafeString

from annotate.models import AssignmentStatus, FinishReason, ImportKind, Role
from steplab.jobs import JobStatus

register = template.Library()

CHOICES: dict[str, type[TextChoices]] = {
    "finish_reason": FinishReason, "assignment_status": AssignmentStatus, "import_kind": ImportKind,
    "import_status": JobStatus, "role": Role,
}


@register.filter
def duration(milliseconds: Any) -> str:
    """427786 → "7 min 8 s"; under a second stays in ms, over an hour drops the seconds; empty → "—"."""
    try:
        ms = float(milliseconds)
    except (TypeError, ValueError):
        return "—"
    if ms != ms or ms < 0:  # NaN or a negative clock difference
        return "—"
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = round(ms / 1000)
    if seconds < 60:
        return f"{ms / 1000:.1f} s" if ms < 10_000 else f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


@register.filter
def choice_label(value: Any, kind: str) -> str:
    """The human label of a stored enum value (``"found_error"|choice_label:"finish_reason"`` → "Found an error");
    an unknown value is shown as it is, so nothing is hidden."""
    if value in (None, ""):
        return "—"
    choices = CHOICES[kind]
    try:
        return str(choices(value).label)
    except ValueError:
        return str(value)


@register.filter
def samples_progress(job: Any) -> str:
    """A sampling job's progress as samples written / expected ("12 / 40 samples"): problems × n per problem,
    the count the sampler's progress fraction is taken over (rewards.jobs.services.sampling)."""
    try:
        per_problem = int((job.config or {}).get("n", 4))
    except (TypeError, ValueError):
        per_problem = 4
    expected = job.problem_count * per_problem
    if not expected:
        return "—"
    done = round(float(job.progress or 0) * expected)
    return f"{done} / {expected} samples"


#: An agreement figure resting on fewer solutions than this is greyed and says so: one overlapped solution gives
#: Krippendorff's α = 1.000, which says nothing about the labels.
MIN_FIGURE_SOLUTIONS = 5


@register.simple_tag
def figure(metric: Any, unit: str, basis: Any = None, basis_unit: str = "solutions", *,
           as_percent: bool = False) -> SafeString:
    """A quality figure ("0.873", or "87.3 %" for a share with ``as_percent``) and what it rests on ("n=12 steps
    from 3 overlapped solutions"); one resting on fewer than ``MIN_FIGURE_SOLUTIONS`` (``basis`` solutions, else
    its own items) is greyed (``data-too-few``) and says what it needs, in the unit it counts."""
    metric = metric if isinstance(metric, dict) else {}
    value, items = metric.get("value"), int(metric.get("items") or 0)
    if value is None:
        return format_html("— <small>n={} {}</small>", f"{items:,}", unit)
    count = items if basis in (None, "") else int(basis)
    counted = unit if basis in (None, "") else basis_unit
    if basis not in (None, "") and count == 1:
        basis_unit = basis_unit.removesuffix("s")
    rests_on = f"n={items:,} {unit}" + ("" if basis in (None, "") else f" from {count:,} {basis_unit}")
    shown = percent_text(value) if as_percent else f"{float(value):.3f}"
    if count >= MIN_FIGURE_SOLUTIONS:
        return format_html("{} <small>{}</small>", shown, rests_on)
    return format_html('<span class="too-few" data-too-few title="too few to rely on">{}</span> '
                       "<small>{}: too few to rely on (it needs at least {} {})</small>", shown, rests_on,
                       MIN_FIGURE_SOLUTIONS, counted)


@register.filter
def percent(fraction: Any) -> str:
    """A fraction as percent with one decimal ("0.8125" → "81.2"); blank for none: one unit on a page."""
    if fraction is None or fraction == "":
        return ""
    return f"{100 * float(fraction):.1f}"


@register.filter
def percent_text(fraction: Any) -> str:
    """A share as the dashboard writes it ("0.703" → "70.3 %"); "—" for none. Every page shows shares so; the
    raw fraction stays in the ``data-*`` attributes scripts read."""
    if fraction is None or fraction == "":
        return "—"
    try:
        return f"{100 * float(fraction):.1f} %"
    except (TypeError, ValueError):
        return "—"
