"""Reports over the store: one self-contained HTML page with SVG charts, or Markdown for issues."""

from kernelkiln.report.data import collect
from kernelkiln.report.html import render as render_html
from kernelkiln.report.markdown import render as render_markdown
from kernelkiln.report.records import Report

__all__ = ["Report", "collect", "render_html", "render_markdown"]
