"""Configuration of the store (one node of kernelkiln's configuration tree)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class StoreConfig(BaseModel):
    """Where memory lives and how writers wait for each other."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(
        default=None,
        description="Storage URL (sqlite:///path or postgresql://…); None means $KILN_STORE, "
        "else sqlite under the user's data directory.",
    )
    busy_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="How long a writer waits for another process's write lock before failing "
        "(SQLite busy timeout; PostgreSQL lock_timeout).",
    )
