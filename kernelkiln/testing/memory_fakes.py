"""Fakes for memory tests and benchmarks: attempts, judged results and a synthetic experience corpus."""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Sequence
from typing import Any

from kernelkiln.memory.callbacks import AttemptResult
from kernelkiln.store.records import Adoption, Attempt, Experience, Measurement, TaskRecord

# Words of the synthetic corpus, in Zipf order (word r drawn with weight 1/(r+1)) as in
# natural text: a few stop words are in nearly every document, kernel vocabulary follows,
# then a long tail of rare words.
_STOP = "the a to of and in for with is on it by this that be as use when".split()
_TOPICS = (
    "vectorize unroll tile block fuse prefetch align transpose pack reduce accumulate parallel "
    "openmp simd avx2 avx512 fma cache l1 l2 stride contiguous layout rowmajor colmajor "
    "softmax matmul gemm conv elementwise layernorm attention reduction scan gather scatter "
    "register spill branch mask tail remainder overflow underflow precision float32 float16 "
    "bfloat16 double int64 index bounds alignment memory bandwidth latency throughput threads "
    "schedule static dynamic chunk barrier atomic lock false sharing numa hugepage tlb"
).split()
_VOCABULARY = _STOP + _TOPICS + [f"w{i}" for i in range(5000)]
_CUMULATIVE = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(_VOCABULARY))))
OP_FAMILIES = ("elementwise", "reduction", "matmul", "softmax", "conv", "norm")
PLATFORMS = ("cpu", "cuda")


_UNSET = object()


def attempt(
    task_id: str = "t1",
    *,
    verdict: str = "KEEP",
    speedup: float | object | None = _UNSET,
    time_ms: float | None = None,
    parent: Attempt | str | None = None,
    agent: str = "",
    **fields: Any,
) -> Attempt:
    """An attempt with sensible defaults: speedup 1.0, or none for a REJECT or when only a time is given."""
    parent_id = parent.id if isinstance(parent, Attempt) else parent
    if speedup is _UNSET:
        speedup = None if verdict == "REJECT" or time_ms is not None else 1.0
    measurements = [Measurement(workload="default", t_cand_ms=time_ms, speedup=speedup)] if time_ms else []
    return Attempt(
        task_id=task_id,
        verdict=verdict,
        speedup=speedup,
        time_ms=time_ms,
        parent_id=parent_id,
        agent=agent,
        measurements=measurements,
        **fields,
    )


def result(
    att: Attempt, adopted: Sequence[str] = (), unadopted: Sequence[str] = (), task: TaskRecord | None = None
) -> AttemptResult:
    """An AttemptResult whose agent adopted ``adopted`` and passed over ``unadopted`` (on a task without tags)."""
    records = [
        Adoption(attempt_id=att.id, experience_id=e, task_id=att.task_id, adopted=True, why="fits") for e in adopted
    ]
    records += [
        Adoption(attempt_id=att.id, experience_id=e, task_id=att.task_id, adopted=False, why="not applicable")
        for e in unadopted
    ]
    return AttemptResult(attempt=att, task=task or TaskRecord(id=att.task_id), adoptions=records)


def _word(rng: random.Random) -> str:
    return _VOCABULARY[bisect.bisect(_CUMULATIVE, rng.random() * _CUMULATIVE[-1])]


def synthetic_experiences(count: int, seed: int = 0, words: int = 40) -> list[Experience]:
    """``count`` experiences of ``words`` Zipf-distributed words, tagged over platforms and op families."""
    rng = random.Random(seed)
    corpus = []
    for i in range(count):
        text = " ".join(_word(rng) for _ in range(words))
        corpus.append(
            Experience(
                id=f"e-syn-{seed}-{i}",
                text=text,
                summary=text[:80],
                platform=PLATFORMS[i % len(PLATFORMS)],
                op_family=OP_FAMILIES[(i // len(PLATFORMS)) % len(OP_FAMILIES)],
                q=round(rng.uniform(-0.2, 1.0), 3),
            )
        )
    return corpus


def synthetic_query(rng: random.Random, words: int = 6) -> str:
    """A prompt-like query drawn from the synthetic corpus's word distribution."""
    return " ".join(_word(rng) for _ in range(words))
