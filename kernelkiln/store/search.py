"""Full-text relevance over experiences: SQLite FTS5 (BM25) or PostgreSQL text search.

Queries are free text; words are OR-ed so that a long prompt-like query still finds
documents sharing only some of its words, and the ranking rewards sharing more.

On SQLite, ranking costs time per matching document, so a query keeps its most
selective words (fewest documents) while their document counts fit a postings budget
(at least one word is always kept): words that occur almost everywhere add little to
BM25 and would make every document a match.
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


def document_counts(conn: Connection, words: list[str], cap: int | None = None) -> dict[str, int]:
    """How many experiences contain each word, counted up to ``cap`` if given (cached per store).

    Counting stops at ``cap`` so a word found everywhere costs no more than a rare one;
    counts only steer which words to keep, so a cache entry lives while the store's size
    moves by less than 10% (a store of a few experiences recounts on every change).
    """
    size = conn.execute(sa.select(sa.func.max(_t.c.seq))).scalar() or 0
    cache = _DF_CACHE.setdefault(str(conn.engine.url), {})
    if len(cache) > _DF_CACHE_WORDS:
        cache.clear()
    limit = cap if cap is not None else -1  # SQLite: LIMIT -1 is no limit
    counts = {}
    for word in words:
        hit = cache.get(word)
        if hit is not None:
            count, counted_limit, then = hit
            exact = counted_limit < 0 or count < counted_limit
            # Within 10% of the size it was counted at, and no slack beyond: a word counted in a small store
            # (none, on the first query of a new one) must be counted again once experiences arrive.
            if (exact or 0 <= limit <= counted_limit) and then * 0.9 <= size <= then * 1.1:
                counts[word] = count if limit < 0 else min(count, limit)
                continue
        count = conn.execute(
            sa.text(
                "SELECT count(*) FROM (SELECT 1 FROM experiences_fts WHERE experiences_fts MATCH :match LIMIT :limit)"
            ),
            {"match": f'{{text summary tags_text}} : "{word}"', "limit": limit},
        ).scalar_one()
        cache[word] = (count, limit, size)
        counts[word] = count
    return counts


# store URL → word → (count, the limit it was counted under (-1: none), store size then)
_DF_CACHE: dict[str, dict[str, tuple[int, int, int]]] = {}
_DF_CACHE_WORDS = 100_000


def selective_terms(conn: Connection, terms: list[str], budget: int) -> list[str]:
    """The words of ``terms`` to search for on SQLite: the rarest whose document counts fit
    ``budget``; when none fits, the single rarest word (then counted exactly, once)."""
    counts = document_counts(conn, terms, budget + 1)
    present = [w for w in terms if counts[w] > 0]
    if present and all(counts[w] > budget for w in present):
        counts = document_counts(conn, present)
        return [min(present, key=lambda w: (counts[w], w))]
    chosen, used = [], 0
    for word in sorted(present, key=lambda w: (counts[w], w)):
        if used + counts[word] > budget:
            break
        chosen.append(word)
        used += counts[word]
    return chosen


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
    postings_budget: int | None = None,
) -> list[tuple[Experience, float]]:
    """The ``limit`` most relevant experiences and their relevance (> 0, higher is better).

    A tag filter keeps experiences whose tag equals it or is unset (applies anywhere).
    Resident experiences are left out unless ``include_resident`` (they are in context
    already). ``postings_budget`` (SQLite) bounds the documents ranked, see the module doc.
    """
    terms = query_terms(query)
    if terms and postings_budget is not None and conn.dialect.name == "sqlite":
        terms = selective_terms(conn, terms, postings_budget)
    if not terms:
        return []
    where = ["e.kind IN :kinds"]
    params: dict[str, object] = {"kinds": list(kinds), "limit": limit}
    for name, value in (("platform", platform), ("op_family", op_family), ("stage", stage)):
        if value is not None:
            where.append(f"(e.{name} IS NULL OR e.{name} = :{name})")
            params[name] = value
    if not include_resident:
        where.append("e.resident = :resident")
        params["resident"] = False
    if conn.dialect.name == "sqlite":
        params["match"] = _fts5_match(terms, op_family)
        # bm25 is computed once per match in the subquery; op_tag only filters (weight 0).
        sql = (
            f"SELECT {_COLUMNS}, -m.rank AS relevance FROM ("
            f"SELECT rowid, bm25(experiences_fts, 1.0, 1.0, 1.0, 0.0) AS rank FROM experiences_fts "
            f"WHERE experiences_fts MATCH :match) m JOIN experiences e ON e.seq = m.rowid "
            f"WHERE {' AND '.join(where)} ORDER BY m.rank, e.id LIMIT :limit"
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


def _fts5_match(terms: list[str], op_family: str | None) -> str:
    """An FTS5 query: any term in the text columns, and the op family (or ``any``) in op_tag.

    The SQL conditions still check tags exactly; the index only prunes.
    """
    words = " OR ".join(f'"{t}"' for t in terms)
    match = f"{{text summary tags_text}} : ({words})"
    tokens = _WORD.findall((op_family or "").lower())
    if tokens:
        match += f' AND op_tag : ("{" ".join(tokens)}" OR "any")'
    return match
