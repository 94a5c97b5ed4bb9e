"""Labeling rules, written: ratings, marks, bad-split reports, continuations and the end of a pass.

Every write locks the labeler's open assignment (``lock.locked_open_assignment``) and answers in the page's words;
the workspace read is ``annotate.workspace``, handing work out is ``annotate.services.leases``.

One package, a module per kind of write, so the rules they share stay in one place: the lock (``lock``), rating
a step and stop-at-first-error (``ratings``), a whole untouched pass at once (``whole_pass``), the marks beside a
rating and the continuations (``marks``), and the end of a pass with its checks (``finish``). The names below are
what the pages, the API and the other services call.
"""
from .finish import finish_assignment, record_outcome, submit_assignment
from .lock import locked_open_assignment
from .marks import decide_step, flag_step, report_bad_split
from .ratings import RatingResult, check_stop_at_first_error, record_rating
from .whole_pass import PlainRating, WrittenPass, finish_written_pass, record_untouched_pass

__all__ = [
    "PlainRating",
    "RatingResult",
    "WrittenPass",
    "check_stop_at_first_error",
    "decide_step",
    "finish_assignment",
    "finish_written_pass",
    "flag_step",
    "locked_open_assignment",
    "record_outcome",
    "record_rating",
    "record_untouched_pass",
    "report_bad_split",
    "submit_assignment",
]
