"""Test stores on every backend: SQLite always, PostgreSQL when ``KILN_TEST_POSTGRES_URL`` is set."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
import sqlalchemy as sa

POSTGRES_ENV = "KILN_TEST_POSTGRES_URL"
_SKIP_REASON = f"{POSTGRES_ENV} is unset: the PostgreSQL backend is not tested (.ci/services sets it)"

if not os.environ.get(POSTGRES_ENV):
    # Shown in pytest's warnings summary even without -rs: the skip is never silent.
    warnings.warn(_SKIP_REASON, pytest.PytestWarning, stacklevel=1)

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param(
        "postgresql",
        id="postgresql",
        marks=[
            pytest.mark.postgres,
            pytest.mark.skipif(
                not os.environ.get(POSTGRES_ENV),
                reason=_SKIP_REASON,
            ),
        ],
    ),
]


def fresh_store_url(backend: str, tmp_path: Path) -> str:
    """The URL of an empty store: a new SQLite file, or the test PostgreSQL database wiped clean."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'kiln.db'}"
    url = os.environ[POSTGRES_ENV]
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP SCHEMA IF EXISTS public CASCADE")
        conn.exec_driver_sql("CREATE SCHEMA public")
    engine.dispose()
    return url
