"""How problem, step, answer and instruction text renders: math kept for KaTeX, Markdown sanitised by nh3.

The labeling pages (``annotate.views``) and the management pages (``annotate.views_manage``) show the same text
the same way.
"""
from __future__ import annotations

import html
import re

import markdown
import nh3
from django.utils.safestring import mark_safe

_MATH = re.compile(r"\$\$.+?\$\$|\\\[.+?\\\]|\\\(.+?\\\)|(?<!\\)\$[^$\n]+?(?<!\\)\$", re.S)


def _wrap_bare_boxed(text: str) -> str:
    r"""Put ``\(…\)`` around a ``\boxed{…}`` written outside math so KaTeX renders it too."""
    out, position = [], 0
    while (start := text.find("\\boxed{", position)) != -1:
        depth, end = 0, start + len("\\boxed")
        while end < len(text):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
            if depth == 0:
                break
        if depth != 0:  # unbalanced: leave as it is
            break
        out.append(text[position:start] + "\\(" + text[start:end] + "\\)")
        position = end
    out.append(text[position:])
    return "".join(out)


_ANSWER_BLOCK = re.compile(r"(^|\n)(#\s*Answer[ \t]*\n+)(.+?)\s*$", re.S)


def _wrap_answer_block(text: str) -> str:
    r"""A step's final ``# Answer`` block is bare LaTeX in PRM800K (``# Answer\n\n\dfrac{20}{3}``):
    put it in ``\(…\)`` so it renders like the rest of the step, unless it already has math delimiters."""
    match = _ANSWER_BLOCK.search(text)
    if match is None or _MATH.search(match.group(3)) or "\\boxed" in match.group(3):
        return text
    return text[:match.start(3)] + "\\(" + match.group(3) + "\\)" + text[match.end(3):]


def math_source(text: str) -> str:
    r"""Text ready for KaTeX auto-render: math delimiters kept, bare ``\boxed{}`` wrapped. Still plain text."""
    text = _wrap_answer_block(text)
    pieces, position = [], 0
    for match in _MATH.finditer(text):
        pieces.append(_wrap_bare_boxed(text[position:match.start()]))
        pieces.append(match.group(0))
        position = match.end()
    pieces.append(_wrap_bare_boxed(text[position:]))
    return "".join(pieces)


def answer_source(answer: str | None) -> str:
    """The ground-truth answer as display math unless it already carries its own delimiters."""
    if not answer:
        return ""
    if _MATH.search(answer) or "\\boxed" in answer:
        return math_source(answer)
    return f"\\({answer}\\)"


_CODE_EXTENSIONS = ["codehilite"]
# Pygments marks its tokens with classes (styled in workspace.css); nothing else may carry a class.
_CODE_ATTRIBUTES = {**nh3.ALLOWED_ATTRIBUTES, **{tag: {"class"} for tag in ("span", "div", "code", "pre")}}
_FENCE = re.compile(r"^\s*(```|~~~)", re.M)


def render_markdown(text: str, *, code: bool = False) -> str:
    """Markdown to sanitised HTML, with math passed through untouched for KaTeX: campaign instructions, and
    (``code``) steps holding fenced code blocks, whose code Pygments highlights."""
    stash: list[str] = []

    def keep(match: re.Match[str]) -> str:
        stash.append(match.group(0))
        return f"\x00{len(stash) - 1}\x00"

    protected = _MATH.sub(keep, text or "")
    rendered = markdown.markdown(protected, extensions=["extra", "sane_lists", *(_CODE_EXTENSIONS if code else [])],
                                 extension_configs={"codehilite": {"guess_lang": False}}, output_format="html")
    rendered = re.sub(r"\x00(\d+)\x00", lambda m: html.escape(stash[int(m.group(1))], quote=False), rendered)
    return nh3.clean(rendered, link_rel="noopener noreferrer nofollow", url_schemes={"http", "https", "mailto"},
                     attributes=_CODE_ATTRIBUTES if code else None)


def step_source(text: str) -> str:
    """A step as the workspace shows it. Most steps are prose and math: plain text for KaTeX (``math_source``,
    escaped by the template). A step with a fenced code block (programming, data answers) is Markdown: rendered,
    highlighted and sanitised like the instructions (marked safe only after nh3), math outside code still KaTeX."""
    if not _FENCE.search(text):
        return math_source(text)
    return mark_safe(render_markdown(text, code=True))  # noqa: S308 — nh3 sanitised it just above
