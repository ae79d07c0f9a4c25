"""Cold-start knowledge: Markdown documents per platform, stored as retrievable sections.

Each ``## `` section of ``knowledge/<platform>/*.md`` becomes an experience of kind
``knowledge`` with a stable id, so seeding twice changes nothing and an edited
document updates its sections in place.
"""

from __future__ import annotations

import hashlib
import re
from importlib import resources

from kernelkiln.store.records import Experience
from kernelkiln.store.store import Store

_HEADING = re.compile(r"^## +(.+)$", re.MULTILINE)


def platforms() -> list[str]:
    """Platforms that have knowledge documents."""
    root = resources.files("kernelkiln.memory.knowledge")
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("_"))


def documents(platform: str) -> dict[str, str]:
    """The platform's documents: file stem → Markdown text."""
    root = resources.files("kernelkiln.memory.knowledge").joinpath(platform)
    if not root.is_dir():
        return {}
    return {
        p.name[:-3]: p.read_text(encoding="utf-8")
        for p in sorted(root.iterdir(), key=lambda p: p.name)
        if p.name.endswith(".md")
    }


def sections(platform: str) -> list[Experience]:
    """The platform's documents cut at ``## `` headings, as knowledge experiences."""
    result = []
    for stem, text in documents(platform).items():
        title = text.splitlines()[0].lstrip("# ").strip() if text else stem
        matches = list(_HEADING.finditer(text))
        for i, match in enumerate(matches):
            heading = match.group(1).strip()
            body = text[match.end() : matches[i + 1].start() if i + 1 < len(matches) else len(text)].strip()
            key = hashlib.sha1(f"{platform}/{stem}/{heading}".encode()).hexdigest()[:12]
            result.append(
                Experience(
                    id=f"k-{platform}-{key}",
                    kind="knowledge",
                    text=f"{heading}\n\n{body}",
                    summary=f"{title}: {heading}",
                    platform=platform,
                    conditions=[stem],
                )
            )
    return result


def seed_knowledge(store: Store, platform: str) -> int:
    """Store the platform's knowledge sections; returns how many were added or changed."""
    changed = 0
    with store.write() as conn:
        for section in sections(platform):
            stored = store.experiences.get(conn, section.id)
            if stored is None:
                store.experiences.add(conn, section)
                changed += 1
            elif stored.text != section.text or stored.summary != section.summary:
                store.experiences.update(conn, section.id, text=section.text, summary=section.summary)
                changed += 1
    return changed
