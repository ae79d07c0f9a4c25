"""Hostile candidates for the guard's adversarial suite (data, never imported).

Each file's first line says what the guard must answer: ``# expect: STAGE: REGEX``; an
optional second line ``# task: NAME`` names the task of kernelkiln/testing/tasks it is judged
on (default: tiny_softmax).
Attacks in native code are written so that the candidate is correct only if its
attack worked: a REJECT for wrong output then proves the attack failed.
"""

from pathlib import Path

HOSTILE = Path(__file__).resolve().parent
