"""Persistence behind a storage URL: ``sqlite:///…`` (embedded default) or ``postgresql://…``."""

from kernelkiln.store.config import StoreConfig
from kernelkiln.store.store import Store, open_store
from kernelkiln.store.url import default_store_url, resolve_store_url

__all__ = ["Store", "StoreConfig", "default_store_url", "open_store", "resolve_store_url"]
