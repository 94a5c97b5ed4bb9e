"""Sampling candidate solutions from a local LM: on success they become the campaign's pool."""
from ..api.sampling import SamplingJobsView
from ..models import SamplingJob
from ..services import sampling
from .registry import JobKind, register

register(JobKind(
    name="sampling", model=SamplingJob, start=sampling.start_sampling_job, run=sampling.run_sampling_job,
    hooks=sampling.sampling_hooks, page="sampling", title="Sampling", related=("campaign", "pool"),
    routes=(("campaigns/{campaign}/sampling/", SamplingJobsView, "sampling"),)))
