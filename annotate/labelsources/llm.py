"""An LLM judge's verdict on a solution's steps (``rewards.served.judge``): steps before the judged first error 1,
that step 0, later ones unlabeled; its source is ``<model>@<template version>``, so a new prompt never replaces
the labels of an earlier one."""
from . import LabelSource, register

LLM = register(LabelSource(name="llm", label="An LLM judge's verdict (a served model asked for the first wrong step)"))


def source_name(model: str, template_version: str) -> str:
    """The source's name: the judging model and the prompt template's version."""
    return f"{model}@{template_version}"
