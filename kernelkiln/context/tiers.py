"""Prompt tiers: the same sections at three sizes, the largest that leaves the reply its room.

- ``full``: every section as written (the system prompt's candidate format, rules and ways of
  working; the lens's playbook; the working code as it is; the feedback with its diagnostics).
- ``compact``: the rules and the candidate format in a few lines each, the working code
  without comments and its ``KNOBS`` table on one line, the feedback as the verdict and its
  figure (and a REJECT's reason); the context layers get what B_k leaves, as in full.
- ``minimal``: the task, the working code (as compact), the verdict and one instruction; no
  context layers and no tools (the reply is in text).

The policy takes the first tier whose prompt leaves the reply ``REPLY_TOKENS`` (or the model's
``max_output_tokens`` where that is less); where even the minimal prompt leaves under
``FLOOR_TOKENS``, the turn is refused before any request, naming the window it needs.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import Literal

Tier = Literal["full", "compact", "minimal"]
TIERS: tuple[Tier, ...] = ("full", "compact", "minimal")
REPLY_TOKENS = 1024  # what a tier must leave the reply (a whole candidate and its summary)
FLOOR_TOKENS = 512  # under this even the minimal prompt is refused: no candidate fits in less

_C_BLOCK = re.compile(r"/\*.*?\*/", re.DOTALL)
_C_LINE = re.compile(r"(?<![:\"'])//[^\n]*")
_BLANKS = re.compile(r"\n\s*\n(\s*\n)+")


def compact_code(code: str) -> str:
    """``code`` without its comments and docstring, its ``KNOBS`` table on one line; as given when it does not parse.

    Python comments and the module docstring go (by the tokenizer, so no string is touched); in
    triple-quoted strings (a candidate's C or C++ source) ``/* */`` and ``//`` comments go; a
    C preprocessor line (``#include``, ``#pragma``) is code and stays.
    """
    try:
        tree = ast.parse(code)
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (SyntaxError, tokenize.TokenError, ValueError):
        return code
    lines = code.splitlines(keepends=True)
    edits: list[tuple[int, int, int, int, str]] = []  # (row0, col0, row1, col1, replacement), 1-based rows
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            edits.append((*tok.start, *tok.end, ""))
        elif tok.type == tokenize.STRING and tok.string.lstrip("rRbBuUfF").startswith(('"""', "'''")):
            edits.append((*tok.start, *tok.end, _without_c_comments(tok.string)))
    body = tree.body
    doc = body[0] if body and isinstance(body[0], ast.Expr) else None
    if doc is not None and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
        if doc.end_lineno is not None and doc.end_col_offset is not None:
            edits = [e for e in edits if not (doc.lineno <= e[0] <= doc.end_lineno)]
            edits.append((doc.lineno, doc.col_offset, doc.end_lineno, doc.end_col_offset, ""))
    knobs = next(
        (n for n in body if isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["KNOBS"]),
        None,
    )
    if knobs is not None and knobs.end_lineno is not None and knobs.end_col_offset is not None:
        segment = ast.get_source_segment(code, knobs.value) or ""
        one_line = "KNOBS = " + " ".join(segment.split()).replace("[ ", "[").replace("{ ", "{").replace(", }", "}")
        edits = [e for e in edits if not (knobs.lineno <= e[0] <= knobs.end_lineno)]
        edits.append((knobs.lineno, knobs.col_offset, knobs.end_lineno, knobs.end_col_offset, one_line))
    text = _applied(lines, edits)
    text = "\n".join(line.rstrip() for line in text.splitlines())
    return _BLANKS.sub("\n\n", text).strip() + "\n"


def _without_c_comments(literal: str) -> str:
    stripped = _C_LINE.sub("", _C_BLOCK.sub("", literal))
    return "\n".join(line for line in stripped.splitlines() if line.strip() or not line)


def _applied(lines: list[str], edits: list[tuple[int, int, int, int, str]]) -> str:
    """``lines`` with each (row0, col0, row1, col1) span replaced, applied from the last so offsets hold."""
    text = list(lines)
    for r0, c0, r1, c1, new in sorted(edits, reverse=True):
        head, tail = text[r0 - 1][:c0], text[r1 - 1][c1:]
        text[r0 - 1 : r1] = [head + new + tail]
    return "".join(text)
