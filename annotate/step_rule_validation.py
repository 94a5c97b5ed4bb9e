"""The step-rule registry's check as a Django validator: forms and API serializers (DRF runs Django validators
too) refuse a rule with the registry's own words, so no layer keeps a list of rules of its own."""
from __future__ import annotations

from django.core.exceptions import ValidationError

from stepcore.steprules import StepRuleError, parse_step_rule


def validate_step_rule(value: str) -> None:
    """Empty passes: it means the campaign's own rule wherever a rule is optional."""
    if not value:
        return
    try:
        parse_step_rule(value)
    except StepRuleError as error:
        raise ValidationError(str(error), code="step_rule") from None
