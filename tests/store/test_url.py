import pytest

from kernelkiln.errors import UserError
from kernelkiln.store import default_store_url, open_store, resolve_store_url


def test_default_url_is_under_the_user_data_dir_and_creates_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    url = default_store_url()
    assert url == f"sqlite:///{tmp_path / 'data' / 'kiln' / 'kiln.db'}"
    assert (tmp_path / "data" / "kiln").is_dir()


def test_env_var_overrides_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_STORE", f"sqlite:///{tmp_path / 'team.db'}")
    assert resolve_store_url().database == str(tmp_path / "team.db")
    store = open_store()
    assert store.url == f"sqlite:///{tmp_path / 'team.db'}"  # as the user wrote it, without the driver's name
    store.close()


def test_explicit_url_wins_over_env(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_STORE", f"sqlite:///{tmp_path / 'env.db'}")
    assert resolve_store_url(f"sqlite:///{tmp_path / 'mine.db'}").database.endswith("mine.db")


def test_postgres_urls_use_psycopg3():
    url = resolve_store_url("postgresql://kiln@localhost:5432/memory")
    assert url.drivername == "postgresql+psycopg"
    assert url.database == "memory"


@pytest.mark.parametrize(
    "bad",
    [
        "mysql://u@h/db",
        "sqlite://",
        "sqlite:///:memory:",
        "sqlite:////no/such/folder/kiln.db",
        "://nothing",
        "postgresql://host",
        "/no/such/folder/kiln.db",
    ],
)
def test_bad_urls_are_user_errors(bad):
    with pytest.raises(UserError, match="bad store URL"):
        resolve_store_url(bad)


def test_a_bare_path_names_a_sqlite_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "sub").mkdir()
    for given, file in ((str(tmp_path / "abs.db"), "abs.db"), ("sub/rel.db", "sub/rel.db"), ("~/home.db", "home.db")):
        url = resolve_store_url(given)
        assert (url.drivername, url.database) == ("sqlite+pysqlite", str(tmp_path / file))


def test_kiln_store_may_be_a_bare_path(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_STORE", str(tmp_path / "team.db"))
    store = open_store()
    assert store.url == f"sqlite:///{tmp_path / 'team.db'}"
    store.close()
    assert (tmp_path / "team.db").is_file()


def test_unreachable_postgres_is_a_user_error():
    with pytest.raises(UserError, match="cannot open store"):
        open_store("postgresql://nobody@127.0.0.1:1/none")
