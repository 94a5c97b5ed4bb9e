"""How problem, step, answer and instruction text renders: math kept for KaTeX, Markdown sanitised by nh3.

The labeling pages (``annotate.views``) and the management pages (``annotate.views_manage``) show the same text
the same way.
"""
from __future__ import annotations

import html
import re
from functools import lru_cache

import markdown
import nh3
from django.utils.safestring import mark_safe

# math that opens with a token and runs, across lines, to the first closer after at least one character
_CLOSERS = {"$$": "$$", "\\[": "\\]", "\\(": "\\)"}
# math on one line between two dollars, neither escaped (no dollar inside, so it never scans past the next one)
_INLINE = r"(?<!\\)\$[^$\n]+(?<!\\)\$"


@lru_cache(maxsize=8)
def _next_math(openers: tuple[str, ...]) -> re.Pattern[str]:
    """The first place math may start: one of ``openers`` (their closers not yet known to be missing) or inline."""
    return re.compile("|".join([*(re.escape(token) for token in openers), _INLINE]))


def math_spans(text: str) -> list[tuple[int, int]]:
    r"""The math in ``text``, leftmost first and never overlapping: ``$$…$$``, ``\[…\]``, ``\(…\)`` (across lines)
    and ``$…$`` (one line, neither dollar escaped), each holding at least one character.

    Linear: an opener whose closer is missing from the rest of the text is dropped from the search once, rather
    than each such opener scanning to the end (``"\(x" * 40000`` was quadratic as one lazy regular expression).
    """
    spans: list[tuple[int, int]] = []
    openers = tuple(_CLOSERS)
    position = 0
    while True:
        # inline math runs through one iterator; an opener token breaks out to find its closer
        for found in _next_math(openers).finditer(text, position):
            token = found.group()
            if token not in _CLOSERS:
                spans.append(found.span())
                continue
            start = found.start()
            closer = _CLOSERS[token]
            at = text.find(closer, start + len(token) + 1)
            if at == -1:  # no closer after this opener, so none after any later one either
                openers = tuple(other for other in openers if other != token)
                position = start + 1
            else:
                spans.append((start, at + len(closer)))
                position = at + len(closer)
            break
        else:
            return spans


def has_math(text: str) -> bool:
    return bool(math_spans(text))


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


_ANSWER_HEADER = re.compile(r"(?:^|\n)#\s*Answer[ \t]*\n+")


#: a multiple-choice answer ("B", "(B)"): a letter to read as text, not a variable to set in math italics
_OPTION_LETTER = re.compile(r"\(?[A-J]\)?\.?")


def _wrap_answer_block(text: str) -> str:
    r"""A step's final ``# Answer`` block is bare LaTeX in PRM800K (``# Answer\n\n\dfrac{20}{3}``):
    put it in ``\(…\)`` so it renders like the rest of the step, unless it already has math delimiters."""
    header = _ANSWER_HEADER.search(text)
    if header is None:
        return text
    # the block runs from the first header to the end, trailing space left outside
    block = text[header.end():].rstrip()
    if not block or has_math(block) or "\\boxed" in block or _OPTION_LETTER.fullmatch(block):
        return text
    end = header.end() + len(block)
    return text[:header.end()] + "\\(" + block + "\\)" + text[end:]


def math_source(text: str) -> str:
    r"""Text ready for KaTeX auto-render: math delimiters kept, bare ``\boxed{}`` wrapped. Still plain text."""
    text = _wrap_answer_block(text)
    pieces, position = [], 0
    for start, end in math_spans(text):
        pieces.append(_wrap_bare_boxed(text[position:start]))
        pieces.append(text[start:end])
        position = end
    pieces.append(_wrap_bare_boxed(text[position:]))
    return "".join(pieces)


def answer_source(answer: str | None) -> str:
    """The ground-truth answer as display math unless it already carries its own delimiters."""
    if not answer:
        return ""
    if has_math(answer) or "\\boxed" in answer:
        return math_source(answer)
    return f"\\({answer}\\)"


_CODE_EXTENSIONS = ["codehilite"]
# Pygments marks its tokens with classes (styled in workspace.css); nothing else may carry a class.
_CODE_ATTRIBUTES = {**nh3.ALLOWED_ATTRIBUTES, **{tag: {"class"} for tag in ("span", "div", "code", "pre")}}
# spaces before a fence on its own line (not \\s, which would rescan every run of blank lines from each line)
_FENCE = re.compile(r"^[^\S\n]*(```|~~~)", re.M)


def render_markdown(text: str, *, code: bool = False) -> str:
    """Markdown to sanitised HTML, with math passed through untouched for KaTeX: campaign instructions, and
    (``code``) steps holding fenced code blocks, whose code Pygments highlights."""
    stash: list[str] = []

    text = text or ""
    pieces, position = [], 0
    for start, end in math_spans(text):
        stash.append(text[start:end])
        pieces.append(f"{text[position:start]}\x00{len(stash) - 1}\x00")
        position = end
    protected = "".join(pieces) + text[position:]
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
