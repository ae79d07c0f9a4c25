"""Where candidates are judged: a pool takes EvaluationInputs and returns futures of Verdicts.

The search loop (``orchestrator/search.py``) hands each candidate to ``pool.submit`` and
acts on whichever future completes first; the pool decides where it runs: this process
(``LocalPool``) or a free device of a Ray cluster (``RayPool``). See docs/architecture.md.
"""
