"""Retrieval latency at 1k/10k/100k experiences and write throughput with 4 writer processes.

    python benchmarks/memory_retrieval.py [--json] [--queries 200] [--writes 250]

Retrieval: the full path an agent takes (FTS pool of 20 with platform and op-family filters,
value re-rank, graph blend over the source attempts' task graphs) on an SQLite store.
Writers: 4 processes each commit ``--writes`` transactions that add an attempt and
read-modify-write one shared counter; lost_writes = expected count − final count.
Targets: p95 ≤ 20 ms at 100k; zero lost writes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kernelkiln.memory.retrieval import Retriever
from kernelkiln.store import open_store
from kernelkiln.store.records import Experience
from kernelkiln.testing.memory_fakes import OP_FAMILIES, PLATFORMS, attempt, synthetic_experiences, synthetic_query
from kernelkiln.testing.store_writers import SHARED_EXPERIENCE, write_attempts

SIZES = (1_000, 10_000, 100_000)
WRITERS = 4
TASKS = 50
ATTEMPTS_PER_TASK = 20


def _populate(url: str, size: int) -> None:
    store = open_store(url)
    sources = []
    with store.write() as conn:
        for t in range(TASKS):
            parent = None
            for i in range(ATTEMPTS_PER_TASK):
                node = attempt(
                    f"task{t}", verdict="REJECT" if i % 5 == 4 else "KEEP", speedup=1.0 + i / 10, parent=parent
                )
                store.attempts.add(conn, node)
                sources.append(node.id)
                parent = node if i % 3 else None
    rng = random.Random(size)
    corpus = synthetic_experiences(size, seed=size)
    chunk = 5_000
    for start in range(0, size, chunk):
        batch = [
            e.model_copy(update={"source_attempt_id": rng.choice(sources)}) if rng.random() < 0.2 else e
            for e in corpus[start : start + chunk]
        ]
        with store.write() as conn:
            store.experiences.add_many(conn, batch)
    store.close()


def _latencies(url: str, queries: int) -> dict[str, float]:
    store = open_store(url)
    retriever = Retriever(store)
    rng = random.Random(7)
    for _ in range(10):  # warm the page cache and the connection pool
        retriever.retrieve(synthetic_query(rng))
    times = []
    for _ in range(queries):
        query = synthetic_query(rng)
        platform, op = rng.choice(PLATFORMS), rng.choice(OP_FAMILIES)
        start = time.perf_counter()
        retriever.retrieve(query, platform=platform, op_family=op)
        times.append((time.perf_counter() - start) * 1000)
    store.close()
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 3),
        "p95_ms": round(times[min(len(times) - 1, int(0.95 * len(times)))], 3),
    }


def _writers(url: str, writes: int) -> dict[str, float | int]:
    store = open_store(url)
    with store.write() as conn:
        store.experiences.add(conn, Experience(id=SHARED_EXPERIENCE, text="counter"))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(WRITERS) as pool:
        pool.apply(len, ([],))  # start the workers before the clock
        start = time.perf_counter()
        done = pool.starmap(write_attempts, [(url, w, writes) for w in range(WRITERS)])
        elapsed = time.perf_counter() - start
    with store.read() as conn:
        counter = store.experiences.get(conn, SHARED_EXPERIENCE).retrievals
        rows = store.attempts.count(conn)
    store.close()
    expected = WRITERS * writes
    return {
        "writes": sum(done),
        "lost_writes": (expected - counter) + (expected - rows),
        "writes_per_s": round(sum(done) / elapsed, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="Print one JSON object.")
    parser.add_argument("--queries", type=int, default=200, help="Timed retrievals per size.")
    parser.add_argument("--writes", type=int, default=250, help="Transactions per writer process.")
    args = parser.parse_args()
    result: dict = {"sizes": {}}
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as tmp:
        for size in SIZES:
            url = f"sqlite:///{Path(tmp) / f'size{size}.db'}"
            _populate(url, size)
            result["sizes"][str(size)] = _latencies(url, args.queries)
            if not args.json:
                print(f"{size:>7} experiences: {result['sizes'][str(size)]}", file=sys.stderr)
        result["writers"] = WRITERS
        result.update(_writers(f"sqlite:///{Path(tmp) / 'writers.db'}", args.writes))
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{WRITERS} writers: {result['writes']} writes, {result['writes_per_s']}/s, {result['lost_writes']} lost")


if __name__ == "__main__":
    main()
