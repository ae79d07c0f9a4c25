"""Hostile candidates for the guard's adversarial suite (data, never imported).

Each file's first line says what the guard must answer: ``# expect: STAGE: REGEX``; an
optional second line ``# task: NAME`` names the task of kernelkiln/testing/tasks it is judged
on (default: tiny_softmax).
Attacks in native code are written so that the candidate is correct only if its
attack worked: a REJECT for wrong output then proves the attack failed.
``inline_*`` cases are the ``native_*`` attacks written with torch's ``load_inline``; all but
the secret reader and the precision downgrade are plain CPython extensions
(``no_implicit_headers=True``), which take the same build and load path in a second where
``<torch/extension.h>`` takes half a minute.
"""

from pathlib import Path

HOSTILE = Path(__file__).resolve().parent
