"""Prompt tiers: the compact working code keeps what the guard and the tuner read, and each tier is shorter."""

from __future__ import annotations

import ast
from pathlib import Path

import kernelkiln
from kernelkiln.context import ContextBuilder
from kernelkiln.context.tiers import compact_code
from kernelkiln.task import knobs as K
from kernelkiln.testing.turns import make_turn, retrieved

SOFTMAX = (Path(kernelkiln.__file__).parent / "examples" / "seeds" / "row_softmax.py").read_text()


def test_compact_code_drops_comments_and_the_docstring_but_keeps_the_preprocessor_and_the_knobs():
    code = compact_code(SOFTMAX)
    ast.parse(code)
    assert "Naive C row softmax" not in code and "# Knobs:" not in code  # docstring and comment
    assert "#include <math.h>" in code and "#if ONLINE" in code and "#define STR(x) #x" in code
    assert K.read_knobs(code) == K.read_knobs(SOFTMAX) and len(code) < len(SOFTMAX)
    (knobs_line,) = [line for line in code.splitlines() if line.startswith("KNOBS = ")]
    assert ast.literal_eval(knobs_line.removeprefix("KNOBS = ")) == dict(
        (k.name, list(k.options)) for k in K.read_knobs(SOFTMAX)
    )


def test_compact_code_strips_c_comments_inside_the_source_string_only():
    code = 'SOURCE = r"""\n/* block */\nint f(void) { return 1; } // trailing\n"""\nURL = "http://x"  # note\n'
    out = compact_code(code)
    assert "block" not in out and "trailing" not in out and "note" not in out
    assert 'URL = "http://x"' in out and "int f(void) { return 1; }" in out


def test_code_that_does_not_parse_is_shown_as_given():
    assert compact_code("def broken(:\n    # keep\n") == "def broken(:\n    # keep\n"


def test_each_tier_is_shorter_and_minimal_shows_no_context_layer():
    turn = make_turn(code=SOFTMAX, experiences=(retrieved("e-1", "unroll the row loop"),))
    builder = ContextBuilder()
    prompts = {t: builder.build(turn, window=32_000, generation=1024, tier=t) for t in ("full", "compact", "minimal")}
    sizes = [prompts[t].estimated_tokens for t in ("full", "compact", "minimal")]
    assert sizes == sorted(sizes, reverse=True) and sizes[2] < sizes[0] / 2, sizes
    assert prompts["compact"].shown_experiences == ("e-1",) and prompts["minimal"].shown_experiences == ()
    assert "Retrieved experiences" not in prompts["minimal"].user and "```python" in prompts["minimal"].user
    assert all(prompts[t].tier == t for t in prompts)


def test_the_full_tier_is_what_the_builder_gave_before_tiers():
    turn = make_turn(code=SOFTMAX)
    builder = ContextBuilder()
    assert builder.build(turn, window=32_000, generation=1024) == builder.build(
        turn, window=32_000, generation=1024, tier="full"
    )
