"""Input forms of the labeling workspace: they check shape and type, the services check the rules.

Every error names its field, so a bad POST (from the page or an outside script) says exactly what is wrong.
"""
from __future__ import annotations

from django import forms

from .models import ERROR_CATEGORY_MAX_CHARS, RATIONALE_MAX_CHARS, FinishReason
from .scales import RATING_MAX, RATING_MIN

#: indexes are stored as 32-bit integers: a larger one is a bad request, not a database error
MAX_INDEX = 2**31 - 1


def _index_field(name: str, *, required: bool = True) -> forms.IntegerField:
    """A 0-based index field whose every error message names the field."""
    messages = {"invalid": f"{name} must be a whole number.", "min_value": f"{name} must be 0 or more.",
                "max_value": f"{name} must be at most %(limit_value)d."}
    if required:
        messages["required"] = f"{name} is required."
    return forms.IntegerField(min_value=0, max_value=MAX_INDEX, required=required, error_messages=messages)


class _StepForm(forms.Form):
    step_index = _index_field("step_index")
    completion_index = _index_field("completion_index", required=False)

    def clean_completion_index(self) -> int:
        value = self.cleaned_data.get("completion_index")
        return 0 if value is None else value


class RatingForm(_StepForm):
    # Any stored value here; the service checks it against the campaign's scale (it knows the campaign).
    rating = forms.IntegerField(min_value=RATING_MIN, max_value=RATING_MAX, error_messages={
        "required": "rating is required (-1, 0 or 1).", "invalid": "rating must be a whole number.",
        "min_value": "rating must be -1, 0 or 1 (or a value of the campaign's scale).",
        "max_value": "rating must be -1, 0 or 1 (or a value of the campaign's scale)."})
    error_category = forms.CharField(required=False, max_length=ERROR_CATEGORY_MAX_CHARS, error_messages={
        "max_length": "error_category is too long (at most %(limit_value)d characters)."})
    time_ms = forms.IntegerField(min_value=0, max_value=7 * 24 * 3600 * 1000, required=False, error_messages={
        "invalid": "time_ms must be a whole number of milliseconds.", "min_value": "time_ms must not be negative.",
        "max_value": "time_ms is implausibly large (over a week)."})
    # Not stripped here: the service strips it and refuses line breaks with its own message.
    rationale = forms.CharField(required=False, strip=False, max_length=RATIONALE_MAX_CHARS + 100, error_messages={
        "max_length": "rationale is too long (at most %(limit_value)d characters)."})

    def clean_rationale(self) -> str | None:
        """Absent is "keep the −1's reason as it is" (None); an empty field clears it."""
        return self.cleaned_data.get("rationale") if "rationale" in self.data else None

    def clean_error_category(self) -> str | None:
        """Absent keeps the error step's category as it is (None); an empty field clears it."""
        return self.cleaned_data.get("error_category") if "error_category" in self.data else None


class OutcomeForm(forms.Form):
    """The labeler's rating of the final answer (campaigns graded by people): correct, incorrect, or cleared."""

    correct = forms.TypedChoiceField(choices=[("true", "correct"), ("false", "incorrect"), ("", "clear")],
                                     coerce=lambda value: value == "true", empty_value=None, required=False,
                                     error_messages={"invalid_choice": "correct must be true, false or empty, "
                                                                       "not %(value)s."})


class FlagForm(_StepForm):
    flagged = forms.TypedChoiceField(choices=[("true", "flag"), ("false", "unflag")],
                                     coerce=lambda value: value == "true", error_messages={
        "required": "flagged is required (true or false).",
        "invalid_choice": "flagged must be true or false, not %(value)s."})


class BadSplitForm(forms.Form):
    step_index = _index_field("step_index")
    reported = forms.TypedChoiceField(choices=[("true", "report"), ("false", "withdraw")],
                                      coerce=lambda value: value == "true", error_messages={
        "required": "reported is required (true or false).",
        "invalid_choice": "reported must be true or false, not %(value)s."})
    note = forms.CharField(required=False, strip=False, max_length=RATIONALE_MAX_CHARS + 100, error_messages={
        "max_length": "note is too long (at most %(limit_value)d characters)."})


class DecisionForm(forms.Form):
    step_index = _index_field("step_index")
    chosen_completion = _index_field("chosen_completion", required=False)
    human_text = forms.CharField(required=False, max_length=20_000, strip=True, error_messages={
        "max_length": "human_text is too long (at most %(limit_value)d characters)."})

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        chosen, text = data.get("chosen_completion"), data.get("human_text")
        if not self.errors and (chosen is None) == (not text):
            raise forms.ValidationError("Give exactly one of chosen_completion or human_text.")
        return data


class FinishForm(forms.Form):
    reason = forms.ChoiceField(choices=[(FinishReason.BAD_PROBLEM, "Bad problem"), (FinishReason.GIVE_UP, "Give up")],
                               error_messages={"required": "reason is required (bad_problem or give_up).",
                                               "invalid_choice": "reason must be bad_problem or give_up, "
                                                                 "not %(value)s."})
    reason_text = forms.CharField(max_length=5_000, strip=True, error_messages={
        "required": "Type a reason first: say why the problem is bad or why you give up.",
        "max_length": "The reason is too long (at most %(limit_value)d characters)."})


def first_error(form: forms.Form) -> str:
    """One line naming the field and what is wrong with it."""
    for field, errors in form.errors.items():
        message = str(errors[0])
        return message if field == "__all__" or message.startswith(field) else f"{field}: {message}"
    return "Invalid input."
