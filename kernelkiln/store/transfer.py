"""Export and import of a whole store as JSON Lines: ``{"type": …, "data": {record}}`` per line.

Import merges: records whose id (or natural key, for stages and board entries) is
already stored are skipped, so importing the same file twice changes nothing.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, cast

from pydantic import BaseModel, ValidationError

from kernelkiln.errors import UserError
from kernelkiln.store.records import (
    Adoption,
    Attempt,
    BoardEntry,
    Experience,
    Rule,
    Run,
    Signature,
    StageRecord,
    TaskRecord,
)
from kernelkiln.store.store import Store

RECORD_TYPES: dict[str, type[BaseModel]] = {
    "run": Run,
    "task": TaskRecord,
    "stage": StageRecord,
    "attempt": Attempt,
    "experience": Experience,
    "adoption": Adoption,
    "rule": Rule,
    "board": BoardEntry,
    "signature": Signature,
}


def iter_records(store: Store) -> Iterator[tuple[str, BaseModel]]:
    """Every record of the store, in an order that import can replay."""
    s = store
    with s.read() as conn:
        collections: dict[str, Sequence[BaseModel]] = {
            "run": s.runs.all(conn),
            "task": s.tasks.all(conn),
            "stage": s.stages.all(conn),
            "attempt": s.attempts.all(conn),
            "experience": s.experiences.list(conn),
            "adoption": s.adoptions.all(conn),
            "rule": s.rules.list(conn),
            "board": s.board.all(conn),
            "signature": s.signatures.all(conn),
        }
    for kind, records in collections.items():
        for record in records:
            yield kind, record


def export_jsonl(store: Store, out: IO[str]) -> Counter[str]:
    """Write the store to ``out``; returns the count per record type."""
    counts: Counter[str] = Counter()
    for kind, record in iter_records(store):
        out.write(json.dumps({"type": kind, "data": record.model_dump(mode="json")}) + "\n")
        counts[kind] += 1
    return counts


def read_jsonl(path: Path) -> list[tuple[str, BaseModel]]:
    """Parse an export file; raises UserError naming the first bad line."""
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            model = RECORD_TYPES[item["type"]]
            records.append((item["type"], model.model_validate(item["data"])))
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            raise UserError(f"{path}:{number}: not a kiln memory record ({type(exc).__name__})") from None
    return records


def import_records(store: Store, records: list[tuple[str, BaseModel]]) -> Counter[str]:
    """Merge ``records`` into the store in one transaction; returns the count added per type."""
    added: Counter[str] = Counter()
    s = store
    stage_map: dict[int, int] = {}
    old_ids: list[int] | None = None  # imported stages' ids, sorted once all stages are in
    with s.write() as conn:
        known_stages = {(r.task_id, r.agent, r.stage, r.closed_at): r.id for r in s.stages.all(conn)}
        known_board = {(b.task_id, b.summary, b.created_at) for b in s.board.all(conn)}
        for kind, record in sorted(records, key=lambda kr: list(RECORD_TYPES).index(kr[0])):
            if kind == "run" and isinstance(record, Run) and s.runs.get(conn, record.id) is None:
                s.runs.add(conn, record)
            elif kind == "task" and isinstance(record, TaskRecord) and s.tasks.get(conn, record.id) is None:
                s.tasks.upsert(conn, record)
            elif kind == "stage" and isinstance(record, StageRecord):
                key = (record.task_id, record.agent, record.stage, record.closed_at)
                if key not in known_stages:
                    known_stages[key] = s.stages.add(conn, record).id
                    added[kind] += 1
                stage_map[record.id or 0] = cast(int, known_stages[key])  # stored stages have ids
                continue
            elif kind == "attempt" and isinstance(record, Attempt) and s.attempts.get(conn, record.id) is None:
                s.attempts.add(conn, record)
            elif (
                kind == "experience"
                and isinstance(record, Experience)
                and not s.experiences.existing_ids(conn, [record.id])
            ):
                old_ids = old_ids if old_ids is not None else sorted(stage_map)
                born = _map_stage(stage_map, old_ids, record.born_stage)
                s.experiences.add(conn, record.model_copy(update={"born_stage": born}))
            elif kind == "adoption" and isinstance(record, Adoption):
                if s.adoptions.add_many(conn, [record]):
                    added[kind] += 1
                continue
            elif kind == "rule" and isinstance(record, Rule) and s.rules.get(conn, record.id) is None:
                s.rules.upsert(conn, record)
            elif kind == "signature" and isinstance(record, Signature) and not s.signatures.exists(conn, record):
                s.signatures.add(conn, record)
            elif (
                kind == "board"
                and isinstance(record, BoardEntry)
                and (record.task_id, record.summary, record.created_at) not in known_board
            ):
                s.board.post(conn, record.model_copy(update={"id": None}), horizon=2**31 - 1)
                known_board.add((record.task_id, record.summary, record.created_at))
            else:
                continue
            added[kind] += 1
    return added


def _map_stage(stage_map: dict[int, int], old_ids: list[int], born_stage: int) -> int:
    """The target store's id for the latest imported stage at or before ``born_stage``."""
    i = bisect.bisect_right(old_ids, born_stage)
    return stage_map[old_ids[i - 1]] if i else 0
