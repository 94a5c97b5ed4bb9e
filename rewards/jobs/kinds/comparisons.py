"""The one-click PRM-vs-ORM comparison: a chain of training and scoring jobs its task advances; its pages are
its own (the dashboard's); the reconciler advances a run whose jobs' follow-ups were lost."""
from ..api.loop import ComparisonCancelView, ComparisonsView, ComparisonView
from ..models import ComparisonRun
from ..services import comparisons
from .registry import JobKind, register

register(JobKind(
    name="comparisons", model=ComparisonRun, start=comparisons.start_comparison, run=comparisons.advance,
    reconcile=comparisons.reconcile,
    routes=(("campaigns/{campaign}/comparisons/", ComparisonsView, "comparisons"),
            ("comparisons/<id:pk>/", ComparisonView, "comparison"),
            ("comparisons/<id:pk>/cancel/", ComparisonCancelView, "comparison_cancel"))))
