"""Recorded sessions for tests: small ``--record`` directories made against the scripted model.

- ``tools_one_agent``: one agent on tiny_softmax, tool-call replies (``submit_candidate``);
- ``tools_two_agents``: two agents sharing tiny_softmax's budget, one stream each;
- ``text_one_agent``: one agent on tiny_softmax in the text reply protocol (a python block,
  a ``Summary:`` line and an adoption JSON block; no tools offered).

They are data: tests load them, check their format and replay their own requests. Make them
again with ``python -m kernelkiln.testing.sessions.make`` (their prompts date from then).
"""

from __future__ import annotations

from pathlib import Path

SESSIONS = Path(__file__).resolve().parent
NAMES = ("tools_one_agent", "tools_two_agents", "text_one_agent")
