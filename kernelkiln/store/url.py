"""Storage URLs: the default location, ``$KILN_STORE``, and validation."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from kernelkiln.errors import UserError

ENV_VAR = "KILN_STORE"


def default_store_url() -> str:
    """The embedded store under the user's data directory (its folder is created)."""
    folder = Path(platformdirs.user_data_dir("kiln"))
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'kiln.db'}"


def resolve_store_url(url: str | None = None) -> URL:
    """Parse ``url`` (else ``$KILN_STORE``, else the default) into a SQLAlchemy URL.

    A bare path (absolute, relative or ``~/…``) names a SQLite file. Raises UserError for
    anything that is not a SQLite file or PostgreSQL URL.
    """
    text = url or os.environ.get(ENV_VAR) or default_store_url()
    try:
        parsed = make_url(text if "://" in text else f"sqlite:///{Path(text).expanduser().absolute()}")
    except ArgumentError:
        raise UserError(f"bad store URL {text!r}: expected sqlite:///PATH or postgresql://USER@HOST/DB") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise UserError(f"bad store URL {text!r}: SQLite needs a file path (sqlite:///PATH)")
        parent = Path(parsed.database).expanduser().parent
        if not parent.is_dir():
            raise UserError(f"bad store URL {text!r}: folder {parent} does not exist")
        return parsed.set(drivername="sqlite+pysqlite", database=str(Path(parsed.database).expanduser()))
    if backend in ("postgresql", "postgres"):
        if not parsed.database:
            raise UserError(f"bad store URL {text!r}: PostgreSQL needs a database name")
        return parsed.set(drivername="postgresql+psycopg")
    raise UserError(f"bad store URL {text!r}: only sqlite:/// and postgresql:// are supported")
