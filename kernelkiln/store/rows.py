"""Conversion between records and table rows (JSON fields are stored as text)."""

from __future__ import annotations

import json
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, CursorResult

JSON_FIELDS = frozenset({"config", "state", "meta", "case", "measurements", "conditions", "knobs"})

R = TypeVar("R", bound=BaseModel)


def to_row(record: BaseModel, table: sa.Table, *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The record's fields that ``table`` has columns for, JSON fields encoded."""
    data = record.model_dump(mode="json")
    if "tags_text" in table.c and hasattr(record, "tags_text"):
        data["tags_text"] = record.tags_text
    row = {}
    for name in table.c.keys():
        if name in data and name not in skip:
            value = data[name]
            row[name] = json.dumps(value) if name in JSON_FIELDS else value
    return row


def from_row(model: type[R], row: Any) -> R:
    """Build ``model`` from a result row (a mapping), decoding JSON fields."""
    data = dict(row._mapping if hasattr(row, "_mapping") else row)
    for name in JSON_FIELDS.intersection(data):
        if isinstance(data[name], str):
            data[name] = json.loads(data[name])
    return model.model_validate(data)


def inserted_id(result: CursorResult[Any]) -> int:
    """The primary key an ``INSERT`` of one row assigned (SQLAlchemy types it optional: only inserts have one)."""
    key = result.inserted_primary_key
    assert key is not None
    return cast(int, key[0])


def insert_ignore(conn: Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows``, skipping any whose key is already stored (also when another writer races us)."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        conn.execute(postgresql.insert(table).on_conflict_do_nothing(), rows)
    else:
        conn.execute(sqlite.insert(table).on_conflict_do_nothing(), rows)
