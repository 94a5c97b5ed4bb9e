"""The PRM800K JSONL format, exactly as OpenAI released it: its schema, parsing and validation of a row, and the
names both directions share, in one package that the importer (``annotate.services.prm800k_import``, the writes)
and the exporter (``annotate.prm800k.export``, the reads) both import.

One row is one labeler's pass over one solution::

    {labeler, timestamp, generation, is_quality_control_question, is_initial_screening_question,
     question: {problem, ground_truth_answer, ground_truth_solution?, pre_generated_steps?,
                pre_generated_answer?, pre_generated_verifier_score?},
     label: {steps: [{completions: [{text, rating, flagged}], human_completion, chosen_completion}],
             total_time, finish_reason}}

Import keeps every row as its own Solution + Assignment (a labeled trajectory); rows that label the
same pre-generated steps share ``content_sha256`` so agreement can group them. Keys Steplab does not
model, and values that differ from the relational ones, go to ``source_extra`` so that export gives
back JSON equal to the input, row for row: ``schema`` holds the row's shape and its parsing, ``roundtrip`` both
directions of that round trip (``solution_extra``, ``assignment_extra`` on import; ``export_row`` on export).
"""
from __future__ import annotations

from .roundtrip import assignment_extra, export_row, human_completion, solution_extra
from .schema import (
    COMPLETION_SCHEMA,
    FINISH_REASONS,
    HUMAN_COMPLETION_SCHEMA,
    IMPORTED_LABELER_PREFIX,
    LABEL_KEYS,
    LABEL_SCHEMA,
    MAX_TIMESTAMP_CHARS,
    QUESTION_KEYS,
    QUESTION_SCHEMA,
    ROW_KEYS,
    ROW_SCHEMA,
    STEP_SCHEMA,
    Field,
    ParsedCompletion,
    ParsedRow,
    ParsedStep,
    content_digest,
    exported_labeler,
    float_or_none,
    imported_username,
    labeler_account,
    parse_row,
    parse_timestamp,
    question_from_fields,
)

__all__ = [
    "COMPLETION_SCHEMA", "FINISH_REASONS", "HUMAN_COMPLETION_SCHEMA", "IMPORTED_LABELER_PREFIX", "LABEL_KEYS",
    "LABEL_SCHEMA", "MAX_TIMESTAMP_CHARS", "QUESTION_KEYS", "QUESTION_SCHEMA", "ROW_KEYS", "ROW_SCHEMA",
    "STEP_SCHEMA", "Field", "ParsedCompletion", "ParsedRow", "ParsedStep", "assignment_extra", "content_digest",
    "export_row", "exported_labeler", "float_or_none", "human_completion", "imported_username", "labeler_account",
    "parse_row", "parse_timestamp", "question_from_fields", "solution_extra",
]
