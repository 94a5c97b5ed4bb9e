"""The labeling refusals the services raise (rating writes, leases, whole-solution labelings) and the workspace read
raises too (not your assignment, not an active labeler); pages and the API answer every one as a labeling error."""
from __future__ import annotations


class LabelingError(Exception):
    """A labeling action the rules refuse; the message is shown to the labeler as is. ``field``: the input at
    fault, where one is (the API reports the error under it)."""

    field = ""


class RatingNotOnScale(LabelingError):
    """A rating that is not a value of the campaign's label scale."""

    field = "rating"


class LeaseExpired(LabelingError):
    pass


class NotAllowed(LabelingError):
    pass
