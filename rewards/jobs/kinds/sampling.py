"""Sampling candidate solutions from a local LM or a served endpoint: on success they become the campaign's pool,
which a labeling round waiting on the job then chooses from."""
from ..api.sampling import SamplingJobsView, SamplingResumeView
from ..models import SamplingJob
from ..services import labeling_rounds, sampling
from .registry import JobKind, register

register(JobKind(
    name="sampling", model=SamplingJob, start=sampling.start_sampling_job, run=sampling.run_sampling_job,
    hooks=sampling.sampling_hooks, after=(labeling_rounds.sampling_finished,), page="sampling", title="Sampling",
    related=("campaign", "pool"),
    routes=(("campaigns/{campaign}/sampling/", SamplingJobsView, "sampling"),
            ("sampling/<id:pk>/resume/", SamplingResumeView, "sampling_resume"))))
