"""Machine step labels (Monte-Carlo rollouts or a PRM's step scores), recorded beside the human ratings."""
from ..api.machine_labeling import MachineLabelingJobsView, MachineLabelingResumeView
from ..models import MachineLabelingJob
from ..services import machine_labeling
from .registry import JobKind, register

register(JobKind(
    name="machine_labeling", model=MachineLabelingJob, start=machine_labeling.start_machine_labeling_job,
    run=machine_labeling.run_machine_labeling_job, hooks=machine_labeling.machine_labeling_hooks,
    page="machine-labels", title="Machine labeling", related=("campaign", "reward_model"),
    routes=(("campaigns/{campaign}/machine-labeling/", MachineLabelingJobsView, "machine_labeling"),
            ("machine-labeling/<id:pk>/resume/", MachineLabelingResumeView, "machine_labeling_resume"))))
