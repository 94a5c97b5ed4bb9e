"""Whole-solution labeling: one request rates every step of a leased solution and finishes it (``POST
/api/assignments/{id}/labeling/``), or several solutions at once (``POST /api/labelings/``). Thin over
``annotate.services.whole_labeling``; a refusal answers ``{"field", "detail"}`` naming the step or field."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from annotate import selectors
from annotate.models import Assignment
from annotate.services.errors import LabelingError, LeaseExpired, NotAllowed
from annotate.services.whole_labeling import LabelingOutcome, LabelingRefused, apply_labeling, apply_labelings
from steplab.jsonlimits import MAX_ID

from . import labeling_serializers as ls


def refusal(error: LabelingError) -> tuple[int, dict[str, str]]:
    """The HTTP status and body of a refused labeling: 403 not yours, 409 lease gone, 400 the input."""
    if isinstance(error, NotAllowed):
        return status.HTTP_403_FORBIDDEN, {"field": "assignment", "detail": str(error)}
    if isinstance(error, LeaseExpired):
        return status.HTTP_409_CONFLICT, {"field": "assignment", "detail": str(error)}
    field = error.field if isinstance(error, LabelingRefused) else "assignment"
    return status.HTTP_400_BAD_REQUEST, {"field": field, "detail": str(error)}


def _not_found(assignment_id: int) -> tuple[int, dict[str, str]]:
    return status.HTTP_404_NOT_FOUND, {"field": "assignment",
                                       "detail": f"No assignment {assignment_id} of yours."}


def _rendered(outcomes: list[LabelingOutcome]) -> dict[int, dict[str, Any]]:
    """The finished assignments as the API shows them: a pass written at once from memory, the others read in
    one prefetched query set."""
    answers = {outcome.assignment.pk: answer for outcome in outcomes
               if (answer := ls.written_answer(outcome)) is not None}
    read_back = {outcome.assignment.pk: outcome.replayed for outcome in outcomes
                 if outcome.assignment.pk not in answers}
    if read_back:
        rows = selectors.assignments_with_ratings().filter(pk__in=read_back)
        answers.update({row.pk: {**ls.LabelingOutSerializer(row).data, "replayed": read_back[row.pk]}
                        for row in rows})
    return answers


def label_one(request: Request, assignment_id: int) -> Response:
    """``POST /api/assignments/{id}/labeling/``: see ``AssignmentViewSet.labeling``."""
    if not 1 <= assignment_id <= MAX_ID:  # no row has such an id; the database would refuse to compare with it
        code, body = _not_found(assignment_id)
        return Response(body, status=code)
    try:
        data = ls.LabelingInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        outcome = apply_labeling(ls.labeling_input(data.validated_data, assignment_id), request.user)
    except (ParseError, ValidationError, LabelingError) as error:
        # Whose assignment it is comes first, as on the per-step endpoints: another labeler's id is a 404
        # whatever the body holds. Asked only of a refused request: the service's lock refuses another's
        # assignment anyway, so an accepted one needs no query of its own for it.
        if not Assignment.objects.filter(pk=assignment_id, labeler_id=request.user.pk).exists():
            code, body = _not_found(assignment_id)
            return Response(body, status=code)
        if not isinstance(error, LabelingError):
            raise
        code, body = refusal(error)
        return Response(body, status=code)
    return Response(_rendered([outcome])[assignment_id])


class LabelingViewSet(viewsets.ViewSet):
    """Several whole-solution labelings in one request, each applied (or refused) on its own."""

    @extend_schema(request=ls.BulkLabelingInputSerializer, responses={200: ls.BulkLabelingOutSerializer})
    def create(self, request: Request) -> Response:
        """Label several of your leased solutions: each item as ``/api/assignments/{id}/labeling/`` takes it,
        plus its ``assignment``. Items are independent (one refused does not hold back the others); each result
        says the status that item alone would have had."""
        data = ls.BulkLabelingInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        items = data.validated_data["labelings"]
        wanted = [item["assignment"] for item in items]
        mine = set(Assignment.objects.filter(pk__in=wanted, labeler_id=request.user.pk).values_list("pk", flat=True))
        inputs = [ls.labeling_input(item, item["assignment"])
                  for item in items if item["assignment"] in mine]
        outcomes = iter(apply_labelings(inputs, request.user))
        results: list[tuple[int, LabelingOutcome | tuple[int, dict[str, str]]]] = []
        for assignment_id in wanted:
            if assignment_id not in mine:
                results.append((assignment_id, _not_found(assignment_id)))
                continue
            outcome = next(outcomes)
            results.append((assignment_id, refusal(outcome) if isinstance(outcome, LabelingError)
                            else outcome))
        rendered = _rendered([r for _, r in results if isinstance(r, LabelingOutcome)])
        answer = []
        for assignment_id, result in results:
            if isinstance(result, LabelingOutcome):
                answer.append({"assignment": assignment_id, "status": status.HTTP_200_OK,
                               "labeling": rendered[assignment_id], "error": None})
            else:
                answer.append({"assignment": assignment_id, "status": result[0], "labeling": None,
                               "error": result[1]})
        return Response({"results": answer})
