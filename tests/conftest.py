"""Every test using ``store_url`` or ``store`` runs on SQLite and on PostgreSQL."""

import pytest

from kernelkiln.store import open_store
from kernelkiln.testing.stores import BACKENDS, fresh_store_url


@pytest.fixture(params=BACKENDS)
def store_url(request, tmp_path):
    return fresh_store_url(request.param, tmp_path)


@pytest.fixture
def store(store_url):
    opened = open_store(store_url)
    yield opened
    opened.close()


@pytest.fixture
def sqlite_store(tmp_path):
    """A store on SQLite only, for behaviour that exists on that backend alone."""
    opened = open_store(fresh_store_url("sqlite", tmp_path))
    yield opened
    opened.close()
