"""Closed stages: the unit of ATU feedback and of rule frequency."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kernelkiln.store import schema
from kernelkiln.store.records import StageRecord
from kernelkiln.store.rows import from_row, inserted_id, to_row

_t = schema.stages


class Stages:
    """The log of closed stages."""

    def add(self, conn: Connection, stage: StageRecord) -> StageRecord:
        """Record a closed stage; returns it with its id."""
        result = conn.execute(_t.insert().values(to_row(stage, _t, skip=("id",))))
        return stage.model_copy(update={"id": inserted_id(result)})

    def last_id(self, conn: Connection) -> int:
        """The id of the latest stage (0 if none): experiences born now count stages after it."""
        return conn.execute(sa.select(sa.func.max(_t.c.id))).scalar() or 0

    def count_since(self, conn: Connection, after_id: int) -> int:
        """How many stages closed after stage ``after_id``."""
        return conn.execute(sa.select(sa.func.count()).select_from(_t).where(_t.c.id > after_id)).scalar_one()

    def all(self, conn: Connection) -> list[StageRecord]:
        """Every stage, oldest first."""
        return [from_row(StageRecord, r) for r in conn.execute(sa.select(_t).order_by(_t.c.id))]

    def for_run(self, conn: Connection, run_id: str, task_id: str) -> list[StageRecord]:
        """The stages ``run_id`` closed on ``task_id``, oldest first."""
        query = sa.select(_t).where(_t.c.run_id == run_id, _t.c.task_id == task_id).order_by(_t.c.id)
        return [from_row(StageRecord, r) for r in conn.execute(query)]
