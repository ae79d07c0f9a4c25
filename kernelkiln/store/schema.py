"""The store's tables (SQLAlchemy Core), identical on SQLite and PostgreSQL.

This is the current schema; ``migrations.py`` brings older stores up to it.
Times are Unix seconds (float); JSON fields are stored as text.
"""

from __future__ import annotations

import sqlalchemy as sa

from kernelkiln.store.records import SUMMARY_CHARS

SCHEMA_VERSION = 4

metadata = sa.MetaData()

schema_version = sa.Table(
    "kiln_schema",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.Float, nullable=False),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("note", sa.Text, nullable=False, default=""),
    sa.Column("config", sa.Text, nullable=False, default="{}"),
    sa.Column("state", sa.Text, nullable=False, default="{}"),  # since version 3
)

tasks = sa.Table(
    "tasks",
    metadata,
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("op_family", sa.String(64), nullable=True),
    sa.Column("platform", sa.String(32), nullable=True),
    sa.Column("meta", sa.Text, nullable=False, default="{}"),
    sa.Column("created_at", sa.Float, nullable=False),
)

attempts = sa.Table(
    "attempts",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("run_id", sa.String(64), nullable=True, index=True),
    sa.Column("task_id", sa.String(200), nullable=False, index=True),
    sa.Column("parent_id", sa.String(64), nullable=True, index=True),
    sa.Column("agent", sa.String(64), nullable=False, default=""),
    sa.Column("lens", sa.String(64), nullable=True),
    sa.Column("summary", sa.String(SUMMARY_CHARS), nullable=False, default=""),
    sa.Column("journal", sa.Text, nullable=False, default=""),
    sa.Column("case", sa.Text, nullable=False, default="{}"),
    sa.Column("code", sa.Text, nullable=False, default=""),
    sa.Column("verdict", sa.String(16), nullable=False),
    sa.Column("error_class", sa.String(64), nullable=True),
    sa.Column("time_ms", sa.Float, nullable=True),
    sa.Column("speedup", sa.Float, nullable=True),
    sa.Column("measurements", sa.Text, nullable=False, default="[]"),
    sa.Column("tokens_in", sa.Integer, nullable=False, default=0),
    sa.Column("tokens_out", sa.Integer, nullable=False, default=0),
    sa.Column("created_at", sa.Float, nullable=False),
)

experiences = sa.Table(
    "experiences",
    metadata,
    # An integer key so SQLite's FTS5 index can point at rows (content_rowid).
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("id", sa.String(64), nullable=False, unique=True),
    sa.Column("kind", sa.String(16), nullable=False, default="experience"),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("summary", sa.String(SUMMARY_CHARS), nullable=False, default=""),
    sa.Column("platform", sa.String(32), nullable=True, index=True),
    sa.Column("op_family", sa.String(64), nullable=True),
    sa.Column("stage", sa.String(16), nullable=True),
    sa.Column("conditions", sa.Text, nullable=False, default="[]"),
    sa.Column("tags_text", sa.Text, nullable=False, default=""),
    sa.Column("source_attempt_id", sa.String(64), nullable=True),
    sa.Column("q", sa.Float, nullable=False, default=0.0),
    sa.Column("retrievals", sa.Integer, nullable=False, default=0),
    sa.Column("adoptions", sa.Integer, nullable=False, default=0),
    sa.Column("distinct_tasks", sa.Integer, nullable=False, default=0),
    sa.Column("resident", sa.Boolean, nullable=False, default=False),
    sa.Column("born_stage", sa.Integer, nullable=False, default=0),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

adoptions = sa.Table(
    "adoptions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("attempt_id", sa.String(64), nullable=False, index=True),
    sa.Column("experience_id", sa.String(64), nullable=False, index=True),
    sa.Column("task_id", sa.String(200), nullable=False),
    sa.Column("adopted", sa.Boolean, nullable=False),
    sa.Column("why", sa.Text, nullable=False, default=""),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.UniqueConstraint("attempt_id", "experience_id", name="uq_adoption"),
)

stages = sa.Table(
    "stages",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), nullable=True),
    sa.Column("task_id", sa.String(200), nullable=False, index=True),
    sa.Column("agent", sa.String(64), nullable=False, default=""),
    sa.Column("stage", sa.String(16), nullable=False),
    sa.Column("score", sa.Float, nullable=False),
    sa.Column("retrieved", sa.Integer, nullable=False, default=0),
    sa.Column("adopted", sa.Integer, nullable=False, default=0),
    sa.Column("closed_at", sa.Float, nullable=False),
)

rules = sa.Table(
    "rules",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),  # the experience's id
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("tokens", sa.Integer, nullable=False),
    sa.Column("frequency", sa.Float, nullable=False, default=0.0),
    sa.Column("resident", sa.Boolean, nullable=False, default=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# Added in schema version 2.
board = sa.Table(
    "board",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.String(200), nullable=False),
    sa.Column("agent", sa.String(64), nullable=False, default=""),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("summary", sa.String(SUMMARY_CHARS), nullable=False),
    sa.Column("reflection", sa.Text, nullable=False, default=""),
    sa.Column("speedup", sa.Float, nullable=True),
    sa.Column("attempt_id", sa.String(64), nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Index("ix_board_task_id", "task_id", "id"),
)

# Added in schema version 4: the signatures tasks were optimized under (memory/signature.py), one row per
# (exact key, task); an attempt names its key in its case (``Case.signature``).
signatures = sa.Table(
    "signatures",
    metadata,
    sa.Column("exact", sa.String(64), primary_key=True),
    sa.Column("task_id", sa.String(200), primary_key=True),
    sa.Column("platform", sa.String(32), nullable=False),
    sa.Column("machine", sa.String(200), nullable=False),
    sa.Column("family", sa.String(64), nullable=True),
    sa.Column("knobs", sa.Text, nullable=False, default="[]"),
    sa.Column("elements", sa.Float, nullable=False, default=0.0),
    sa.Column("inner", sa.Float, nullable=False, default=0.0),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Index("ix_signatures_machine", "platform", "machine"),
)

V1_TABLES = (runs, tasks, attempts, experiences, adoptions, stages, rules)
