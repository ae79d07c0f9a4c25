"""Prompts as data: Jinja2 templates in this folder, rendered by name.

``render("system", platform="cpu")`` renders ``system.md.j2``; a name may also be given
with its suffix. ``macros("items")`` exposes a template's macros to Python, which is how
the context builder renders one item at a time (to count its tokens) while the wording
stays in the template.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, Template

PROMPT_DIR = Path(__file__).resolve().parent
SUFFIX = ".md.j2"


def excerpt(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a line end, noting what was left out."""
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit + 1)
    cut = cut if cut > 0 else limit
    return f"{text[:cut].rstrip()}\n# … {len(text) - cut} more characters"


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The shared environment: strict about missing values, no HTML escaping, an ``excerpt`` filter."""
    env = Environment(
        loader=FileSystemLoader(PROMPT_DIR),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["excerpt"] = excerpt
    return env


def template(name: str) -> Template:
    """The template ``name`` (``system`` or ``system.md.j2``)."""
    return environment().get_template(name if name.endswith(".j2") else name + SUFFIX)


def render(name: str, **values: Any) -> str:
    """Render template ``name`` with ``values`` (a missing value is an error, never blank)."""
    return template(name).render(**values)


def macros(name: str) -> Any:
    """The macros of template ``name``, callable from Python (each returns text)."""
    return template(name).module
