"""Memory over the configured store, as the commands that run optimizers open it."""

from __future__ import annotations

import sys
from pathlib import Path

from kernelkiln.memory.memory import Memory
from kernelkiln.store import open_store


def open_memory(store_config, readonly: bool, out_root: Path) -> Memory:
    """Memory over the configured store; ``readonly``: lent from it, the run's records in ``out_root``/readonly.db."""
    if not readonly:
        return Memory(open_store(config=store_config))
    lent = open_store(config=store_config, readonly=True)
    out_root.mkdir(parents=True, exist_ok=True)
    own = open_store(f"sqlite:///{(out_root / 'readonly.db').resolve()}", store_config)
    print(f"kiln: memory lent read-only from {shown(lent.url)}; this run's records go to {own.url}", file=sys.stderr)
    return Memory(own, lent=lent)


def shown(url: str) -> str:
    """A store URL fit to print: its password, if any, masked."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url
