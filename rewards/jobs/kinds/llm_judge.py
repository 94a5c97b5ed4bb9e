"""Machine step labels from an LLM judge on a served endpoint, judged in the worker, one request per solution."""
from ..models import LlmJudgeJob
from ..services import llm_judge
from .registry import JobKind, register

register(JobKind(
    name="llm_judge", model=LlmJudgeJob, start=llm_judge.start_llm_judge_job, run=llm_judge.run_llm_judge_job,
    reconcile=llm_judge.reconcile_llm_judge_jobs, page="llm-judge", title="LLM judge",
    related=("campaign", "endpoint")))
