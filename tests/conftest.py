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
