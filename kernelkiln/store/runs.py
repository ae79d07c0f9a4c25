"""Runs and tasks: the containers attempts belong to."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kernelkiln.store import schema
from kernelkiln.store.records import Run, TaskRecord
from kernelkiln.store.rows import from_row, insert_ignore, to_row


class Runs:
    """Runs of the optimizer."""

    def add(self, conn: Connection, run: Run) -> Run:
        """Insert ``run`` (ignored if its id already exists)."""
        insert_ignore(conn, schema.runs, [to_row(run, schema.runs)])
        return run

    def update(self, conn: Connection, run: Run) -> Run:
        """Store ``run``'s note, config and state over the stored ones (its progress, as the run goes)."""
        row = to_row(run, schema.runs)
        conn.execute(
            schema.runs.update()
            .where(schema.runs.c.id == run.id)
            .values(note=row["note"], config=row["config"], state=row["state"])
        )
        return run

    def get(self, conn: Connection, run_id: str) -> Run | None:
        """The run with ``run_id``, or None."""
        row = conn.execute(sa.select(schema.runs).where(schema.runs.c.id == run_id)).first()
        return from_row(Run, row) if row else None

    def all(self, conn: Connection) -> list[Run]:
        """Every run, oldest first."""
        return [from_row(Run, r) for r in conn.execute(sa.select(schema.runs).order_by(schema.runs.c.created_at))]


class Tasks:
    """Tasks memory has seen."""

    def upsert(self, conn: Connection, task: TaskRecord) -> TaskRecord:
        """Insert ``task`` or refresh its tags."""
        row = to_row(task, schema.tasks)
        insert_ignore(conn, schema.tasks, [row])
        row.pop("created_at")
        conn.execute(schema.tasks.update().where(schema.tasks.c.id == task.id).values(row))
        return task

    def add_if_missing(self, conn: Connection, task: TaskRecord) -> None:
        """Insert ``task`` unless a task with its id is stored (whose tags are kept)."""
        insert_ignore(conn, schema.tasks, [to_row(task, schema.tasks)])

    def get(self, conn: Connection, task_id: str) -> TaskRecord | None:
        """The task with ``task_id``, or None."""
        row = conn.execute(sa.select(schema.tasks).where(schema.tasks.c.id == task_id)).first()
        return from_row(TaskRecord, row) if row else None

    def all(self, conn: Connection) -> list[TaskRecord]:
        """Every task, by id."""
        return [from_row(TaskRecord, r) for r in conn.execute(sa.select(schema.tasks).order_by(schema.tasks.c.id))]
