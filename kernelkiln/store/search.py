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
import sqlite3
import threading

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kernelkiln.store import schema
from kernelkiln.store.records import Experience
from kernelkiln.store.rows import from_row

_WORD = re.compile(r"[a-z0-9_]+")
MAX_TERMS = 32

_t = schema.experiences
_COLUMNS = ", ".join(f"e.{c.name}" for c in _t.c if c.name != "seq")
_local = threading.local()


def query_terms(query: str) -> list[str]:
    """The distinct lower-case words of ``query`` (at most MAX_TERMS)."""
    terms: list[str] = []
    for word in _WORD.findall(query.lower()):
        if word not in terms:
            terms.append(word)
    return terms[:MAX_TERMS]


def index_tokens(words: list[str]) -> list[list[str]]:
    """Each word as the FTS5 index stores it (porter stems, split on punctuation)."""
    conn = getattr(_local, "tokenizer", None)
    if conn is None:
        # A private in-memory FTS5 table with the index's tokenizer: exact tokens, no guessing.
        conn = sqlite3.connect(":memory:")
        conn.execute("CREATE VIRTUAL TABLE q USING fts5(w, tokenize='porter unicode61')")
        conn.execute("CREATE VIRTUAL TABLE qv USING fts5vocab(q, 'instance')")
        _local.tokenizer = conn
    conn.execute("DELETE FROM q")
    conn.executemany("INSERT INTO q(rowid, w) VALUES (?, ?)", list(enumerate(words)))
    tokens: list[list[str]] = [[] for _ in words]
    for term, doc in conn.execute("SELECT term, doc FROM qv ORDER BY doc, offset"):
        tokens[doc].append(term)
    return tokens


def document_counts(conn: Connection, tokens: list[str]) -> dict[str, int]:
    """How many experiences contain each index token (cached per store while it grows < 10%).

    The vocabulary table counts by reading a token's whole posting list, which is slow for
    common tokens; the counts only steer which words to keep, so slightly stale is fine.
    """
    size = conn.execute(sa.select(sa.func.max(_t.c.seq))).scalar() or 0
    cache = _DF_CACHE.setdefault(str(conn.engine.url), {})
    counts, missing = {}, []
    for token in tokens:
        hit = cache.get(token)
        if hit is not None and size <= hit[1] * 1.1 + 100:
            counts[token] = hit[0]
        else:
            missing.append(token)
    if missing:
        marks = ", ".join(f":t{i}" for i in range(len(missing)))
        rows = conn.execute(
            sa.text(f"SELECT term, doc FROM experiences_vocab WHERE term IN ({marks})"),
            {f"t{i}": t for i, t in enumerate(missing)},
        )
        found = dict(rows.all())
        for token in missing:
            counts[token] = found.get(token, 0)
            cache[token] = (counts[token], size)
    return counts


_DF_CACHE: dict[str, dict[str, tuple[int, int]]] = {}


def selective_terms(conn: Connection, terms: list[str], budget: int) -> list[str]:
    """The words of ``terms`` to search for on SQLite, rarest first, within ``budget`` postings."""
    tokens = index_tokens(terms)
    distinct = sorted({t for group in tokens for t in group})
    if not distinct:
        return []
    docs = document_counts(conn, distinct)
    # A word's count is its rarest token's (a word such as row_sum is a phrase of tokens).
    counts = {w: min(docs.get(t, 0) for t in group) for w, group in zip(terms, tokens) if group}
    chosen, used = [], 0
    for word in sorted((w for w in counts if counts[w] > 0), key=lambda w: (counts[w], w)):
        if chosen and used + counts[word] > budget:
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
    params: dict = {"kinds": list(kinds), "limit": limit}
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
