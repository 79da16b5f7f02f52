"""Gutenberg block markup from what the agent writes: plain text or bare HTML becomes blocks,
so posts it creates edit cleanly in the block editor."""

from __future__ import annotations

import html
import re

_BLOCK = re.compile(r"<!--\s*wp:")
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_HEADING = re.compile(r"^<h([1-6])(\s[^>]*)?>(.*)</h\1>$", re.DOTALL | re.IGNORECASE)
_PARAGRAPH = re.compile(r"^<p(\s[^>]*)?>(.*)</p>$", re.DOTALL | re.IGNORECASE)
_BLOCK_HTML = re.compile(
    r"^<(div|ul|ol|table|figure|blockquote|pre|section|iframe|hr|img|form|script|style)\b",
    re.IGNORECASE,
)


def blocks(content: str) -> str:
    """Block markup as given; plain text or bare HTML wrapped into blocks: paragraphs (split at
    blank lines; single newlines become <br>), <h1>-<h6> headings, other block-level HTML as a
    Custom HTML block. Text without any tags is HTML-escaped."""
    if not content.strip() or _BLOCK.search(content):
        return content
    out = []
    for chunk in re.split(r"\n\s*\n", content.strip()):
        chunk = chunk.strip()
        if not chunk:
            continue
        if heading := _HEADING.match(chunk):
            level = int(heading.group(1))
            attrs = "" if level == 2 else f' {{"level":{level}}}'
            out.append(
                f"<!-- wp:heading{attrs} -->\n<h{level}>{heading.group(3).strip()}</h{level}>\n"
                "<!-- /wp:heading -->"
            )
        elif _BLOCK_HTML.match(chunk):
            out.append(f"<!-- wp:html -->\n{chunk}\n<!-- /wp:html -->")
        else:
            if paragraph := _PARAGRAPH.match(chunk):
                chunk = paragraph.group(2).strip()
            elif not _TAG.search(chunk):
                chunk = html.escape(chunk, quote=False)
            inner = "<br>".join(line.strip() for line in chunk.splitlines())
            out.append(f"<!-- wp:paragraph -->\n<p>{inner}</p>\n<!-- /wp:paragraph -->")
    return "\n\n".join(out)
