"""Every hostile candidate is a REJECT with a specific reason, and nothing else is harmed."""

from __future__ import annotations

import os
import re
import socket
import threading
from pathlib import Path

import pytest

from kernelkiln.guard import GuardSession, sandbox
from kernelkiln.task import load_task
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.hostile import HOSTILE
from kernelkiln.testing.tasks import TASKS

CASES = sorted(p for p in HOSTILE.glob("*.py") if p.name != "__init__.py")
SECRET = "kiln-test-secret-8d1f0c"


@pytest.fixture(scope="module")
def session():
    os.environ["KILN_TEST_SECRET"] = SECRET
    try:
        with GuardSession(load_task(TASKS / "tiny_softmax.py"), fast_config()) as guard:
            yield guard
    finally:
        os.environ.pop("KILN_TEST_SECRET", None)


@pytest.fixture(scope="module")
def listener():
    """A loopback server that records whether anything connected."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    seen: list[bool] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            seen.append(True)
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], seen
    stop.set()
    thread.join()
    server.close()


def _expectation(path: Path) -> tuple[str, str]:
    match = re.match(r"# expect: (\w+): (.+)", path.read_text().splitlines()[0])
    assert match, f"{path.name} must start with '# expect: STAGE: REGEX'"
    return match.group(1), match.group(2)


@pytest.mark.parametrize("case", CASES, ids=[p.stem for p in CASES])
def test_hostile_candidate_is_rejected_with_a_specific_reason(case, session, listener, tmp_path):
    port, connections = listener
    outside = tmp_path / "outside" / "pwned"
    outside.parent.mkdir()
    secret_file = tmp_path / "secret.h"
    secret_file.write_text(f'const char* leaked = "{SECRET}";\n')
    secret_file.chmod(0o600)
    source = (case.read_text().replace("@PORT@", str(port)).replace("@OUTSIDE@", str(outside))
              .replace("@SECRET_FILE@", str(secret_file)))
    stage, reason = _expectation(case)

    verdict = session.evaluate(source)

    assert verdict.verdict == "REJECT", verdict.reason
    assert verdict.stage == stage, verdict.reason
    assert re.search(reason, verdict.reason), verdict.reason
    assert SECRET not in verdict.model_dump_json()
    assert not outside.exists()
    assert not Path("/tmp/kiln_pwned_by_candidate").exists()
    assert not connections


def test_the_guard_and_its_workers_survive_the_whole_suite(session):
    ok = (TASKS.parent / "hostile" / "returns_input.py").read_text()
    assert session.evaluate(ok).verdict == "REJECT"  # the reference worker still answers
    if session._build_uid is not None:
        for slot_uid in (sandbox.allocate_uid(s) for s in range(4)):
            assert sandbox.pids_of_user(slot_uid) == [] or slot_uid == session._ref.uid
