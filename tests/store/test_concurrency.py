"""Several processes writing at once, and a writer killed with SIGKILL mid-transaction."""

import multiprocessing
import time

from kernelkiln.store import open_store
from kernelkiln.store.records import Experience
from kernelkiln.testing.store_writers import SHARED_EXPERIENCE, kill, write_attempts, write_batches_forever

WRITERS = 4
WRITES = 25
BATCH = 20


def test_concurrent_writers_lose_no_update(store):
    with store.write() as conn:
        store.experiences.add(conn, Experience(id=SHARED_EXPERIENCE, text="counter"))
    url = store.engine.url.render_as_string(hide_password=False).replace("+psycopg", "").replace("+pysqlite", "")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(WRITERS) as pool:
        done = pool.starmap(write_attempts, [(url, w, WRITES) for w in range(WRITERS)])
    assert done == [WRITES] * WRITERS
    with store.read() as conn:
        assert store.attempts.count(conn) == WRITERS * WRITES
        assert store.experiences.get(conn, SHARED_EXPERIENCE).retrievals == WRITERS * WRITES


def test_sigkill_mid_write_leaves_the_store_consistent(store, tmp_path):
    url = store.engine.url.render_as_string(hide_password=False).replace("+psycopg", "").replace("+pysqlite", "")
    ready = tmp_path / "ready"
    ctx = multiprocessing.get_context("spawn")
    writer = ctx.Process(target=write_batches_forever, args=(url, BATCH, str(ready)))
    writer.start()
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists(), "the writer never committed"
    time.sleep(0.3)  # let it get well into later transactions
    kill(writer.pid)
    writer.join()
    assert writer.exitcode == -9

    reopened = open_store(url)
    try:
        assert reopened.integrity_errors() == []
        with reopened.read() as conn:
            experiences = reopened.experiences.list(conn)
            adoptions = reopened.adoptions.all(conn)
        batches: dict[str, int] = {}
        for exp in experiences:
            batches[exp.summary] = batches.get(exp.summary, 0) + 1
        assert batches and set(batches.values()) == {BATCH}, "a batch was torn"
        assert len(adoptions) == len(experiences)
        # The store still takes writes after the crash.
        with reopened.write() as conn:
            reopened.experiences.add(conn, Experience(text="after the crash"))
    finally:
        reopened.close()
