"""Full-text relevance over experiences: SQLite FTS5 (BM25) or PostgreSQL text search.

Queries are free text; words are OR-ed so that a long prompt-like query still finds
documents sharing only some of its words, and the ranking rewards sharing more.
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kernelkiln.store import schema
from kernelkiln.store.records import Experience
from kernelkiln.store.rows import from_row

_WORD = re.compile(r"[a-z0-9_]+")
MAX_TERMS = 32

_t = schema.experiences
_COLUMNS = ", ".join(f"e.{c.name}" for c in _t.c if c.name != "seq")


def query_terms(query: str) -> list[str]:
    """The distinct lower-case words of ``query`` (at most MAX_TERMS)."""
    terms: list[str] = []
    for word in _WORD.findall(query.lower()):
        if word not in terms:
            terms.append(word)
    return terms[:MAX_TERMS]


def search_experiences(
    conn: Connection,
    query: str,
    *,
    limit: int,
    platform: str | None = None,
    op_family: str | None = None,
    stage: str | None = None,
    kinds: tuple[str, ...] = ("experience", "knowledge"),
    include_resident: bool = False,
) -> list[tuple[Experience, float]]:
    """The ``limit`` most relevant experiences and their relevance (> 0, higher is better).

    A tag filter keeps experiences whose tag equals it or is unset (applies anywhere).
    Resident experiences are left out unless ``include_resident`` (they are in context already).
    """
    terms = query_terms(query)
    if not terms:
        return []
    where = ["e.kind IN :kinds"]
    params: dict = {"kinds": list(kinds), "limit": limit}
    for name, value in (("platform", platform), ("op_family", op_family), ("stage", stage)):
        if value is not None:
            where.append(f"(e.{name} IS NULL OR e.{name} = :{name})")
            params[name] = value
    if not include_resident:
        where.append("e.resident = :resident")
        params["resident"] = False
    if conn.dialect.name == "sqlite":
        params["match"] = " OR ".join(f'"{t}"' for t in terms)
        sql = (
            f"SELECT {_COLUMNS}, -bm25(experiences_fts) AS relevance FROM experiences_fts "
            f"JOIN experiences e ON e.seq = experiences_fts.rowid "
            f"WHERE experiences_fts MATCH :match AND {' AND '.join(where)} "
            f"ORDER BY bm25(experiences_fts) LIMIT :limit"
        )
    else:
        # PostgreSQL has no BM25: rank by how many distinct query words a document has
        # (coordination), then by cover density squashed into [0, 1).
        params["tsquery"] = " | ".join(terms)
        coordination = " + ".join(f"(e.tsv @@ plainto_tsquery('english', :t{i}))::int" for i in range(len(terms)))
        params.update({f"t{i}": t for i, t in enumerate(terms)})
        sql = (
            f"SELECT {_COLUMNS}, ({coordination}) + ts_rank_cd(e.tsv, tsq, 32) AS relevance "
            f"FROM experiences e, to_tsquery('english', :tsquery) tsq "
            f"WHERE e.tsv @@ tsq AND {' AND '.join(where)} "
            f"ORDER BY relevance DESC, e.id LIMIT :limit"
        )
    statement = sa.text(sql).bindparams(sa.bindparam("kinds", expanding=True))
    results = []
    for row in conn.execute(statement, params):
        data = dict(row._mapping)
        relevance = float(data.pop("relevance"))
        results.append((from_row(Experience, data), relevance))
    return results
