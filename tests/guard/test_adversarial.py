"""Every hostile candidate is a REJECT with a specific reason, and nothing else is harmed."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
from pathlib import Path

import pytest

from kernelkiln import native
from kernelkiln.guard import GuardSession
from kernelkiln.guard.worker import processes, sandbox
from kernelkiln.native.extension import extension_problem
from kernelkiln.task import load_task
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.hostile import HOSTILE
from kernelkiln.testing.tasks import TASKS

CASES = sorted(p for p in HOSTILE.glob("*.py") if p.name != "__init__.py")
SECRET = "kiln-test-secret-8d1f0c"
DEFAULT_TASK = "tiny_softmax"


@pytest.fixture(scope="module")
def sessions():
    """A guard session per task, opened when a case first needs it and all closed at the end."""
    os.environ["KILN_TEST_SECRET"] = SECRET
    opened: dict[str, GuardSession] = {}

    def session(task: str = DEFAULT_TASK) -> GuardSession:
        if task not in opened:
            opened[task] = GuardSession(load_task(TASKS / f"{task}.py"), fast_config())
        return opened[task]

    try:
        yield session
    finally:
        for guard in opened.values():
            guard.close()
        os.environ.pop("KILN_TEST_SECRET", None)


@pytest.fixture
def home_secret():
    """A private file (mode 600) planted in the home directory of the user running the tests."""
    home = Path.home()
    secret = home / f".kiln-test-secret-{os.getpid()}.h"
    secret.write_text(f'const char* leaked = "{SECRET}";\n')  # valid C: an include of it would build
    secret.chmod(0o600)
    planted = home / "kiln_pwned_by_candidate"
    planted.unlink(missing_ok=True)  # a leftover of an earlier, failed run would fail every case
    yield secret, planted
    secret.unlink(missing_ok=True)
    assert not planted.exists(), "a candidate wrote into the home directory"
    planted.unlink(missing_ok=True)


@contextlib.contextmanager
def _loopback(kind: int):
    """A server on 127.0.0.1 (TCP or UDP) recording whatever reaches it: (port, what arrived)."""
    server = socket.socket(socket.AF_INET, kind)
    server.bind(("127.0.0.1", 0))
    if kind == socket.SOCK_STREAM:
        server.listen()
    server.settimeout(0.2)
    seen: list[bytes] = []
    stop = threading.Event()

    def receive() -> None:
        while not stop.is_set():
            try:
                if kind == socket.SOCK_STREAM:
                    conn, _ = server.accept()
                    conn.close()
                    seen.append(b"connected")
                else:
                    seen.append(server.recv(64))
            except OSError:
                continue

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], seen
    finally:
        stop.set()
        thread.join()
        server.close()


@pytest.fixture(scope="module")
def listener():
    with _loopback(socket.SOCK_STREAM) as served:
        yield served


@pytest.fixture(scope="module")
def datagrams():
    with _loopback(socket.SOCK_DGRAM) as served:
        yield served


def _expectation(path: Path) -> tuple[str, str, str]:
    """The stage and reason regex of the first line, and the task of an optional second ``# task: NAME``."""
    lines = path.read_text().splitlines()
    match = re.match(r"# expect: (\w+): (.+)", lines[0])
    assert match, f"{path.name} must start with '# expect: STAGE: REGEX'"
    task = re.match(r"# task: (\w+)$", lines[1]) if len(lines) > 1 else None
    if task:
        assert (TASKS / f"{task.group(1)}.py").exists(), f"{path.name}: no task {task.group(1)} in {TASKS}"
    return match.group(1), match.group(2), task.group(1) if task else DEFAULT_TASK


@pytest.mark.parametrize("case", CASES, ids=[p.stem for p in CASES])
def test_hostile_candidate_is_rejected_with_a_specific_reason(
    case, sessions, listener, datagrams, home_secret, tmp_path
):
    port, connections = listener
    udp_port, received = datagrams
    secret_in_home, planted_in_home = home_secret
    cache = native.default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "kiln_pwned_by_candidate.so").unlink(missing_ok=True)
    outside = tmp_path / "outside" / "pwned"
    outside.parent.mkdir()
    secret_file = tmp_path / "secret.h"
    secret_file.write_text(f'const char* leaked = "{SECRET}";\n')
    secret_file.chmod(0o600)
    source = (
        case.read_text()
        .replace("@PORT@", str(port))
        .replace("@OUTSIDE@", str(outside))
        .replace("@SECRET_FILE@", str(secret_file))
        .replace("@UDP_PORT@", str(udp_port))
        .replace("@HOME_SECRET@", str(secret_in_home))
        .replace("@HOME_DIR@", str(Path.home()))
        .replace("@CACHE_DIR@", str(cache))
    )
    stage, reason, task = _expectation(case)
    if case.name.startswith("inline_") and (missing := extension_problem()) is not None:
        pytest.skip(f"torch extensions are not built here: {missing}")

    verdict = sessions(task).evaluate(source)

    assert verdict.verdict == "REJECT", verdict.reason
    assert verdict.stage == stage, verdict.reason
    assert re.search(reason, verdict.reason), verdict.reason
    assert SECRET not in verdict.model_dump_json()
    assert not outside.exists()
    assert not Path("/tmp/kiln_pwned_by_candidate").exists()
    assert not connections
    assert not received
    assert not planted_in_home.exists()
    assert not (cache / "kiln_pwned_by_candidate.so").exists()


def test_an_honest_native_kernel_named_like_the_reference_op_is_judged_not_refused(sessions):
    verdict = sessions("tiny_relu").evaluate((CANDIDATES / "relu_c.py").read_text(), timed=False)
    assert verdict.verdict == "ACCEPT" and verdict.correct, verdict.reason


@pytest.mark.skipif(extension_problem() is not None, reason=f"no torch extensions here: {extension_problem()}")
def test_a_kernelbench_load_inline_candidate_is_built_in_the_sandbox_and_judged_as_written(sessions):
    verdict = sessions("tiny_relu").evaluate((CANDIDATES / "relu_load_inline.py").read_text(), timed=False)
    assert verdict.verdict == "ACCEPT" and verdict.correct, verdict.reason


def test_the_guard_and_its_workers_survive_the_whole_suite(sessions):
    session = sessions()
    ok = (TASKS.parent / "hostile" / "returns_input.py").read_text()
    assert session.evaluate(ok).verdict == "REJECT"  # the reference worker still answers
    if session._build_uid is not None:
        for slot_uid in (sandbox.allocate_uid(session._slot(s)) for s in range(4)):
            assert processes.pids_of_user(slot_uid) == [] or slot_uid == session._ref.uid
