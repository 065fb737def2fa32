#!/usr/bin/env python3
"""Every relative link in the repository's Markdown resolves to a file or folder inside it.

    /usr/bin/python3 tests/doc_links_check.py [ROOT]

Checks `[text](target)` links in README.md, docs/, scenarios/, artifact/ and bench/results/:
targets that are URLs or pure anchors are skipped; a target's `#anchor` part is dropped. Exit 0
when every link resolves, 1 with one line per broken link (`FILE:LINE: target`) otherwise.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PAGES = ["README.md", "docs", "scenarios", "artifact", "bench/results", "analysis"]


def broken_links(root: Path) -> list[str]:
    problems: list[str] = []
    pages: list[Path] = []
    for entry in PAGES:
        path = root / entry
        pages += [path] if path.is_file() else sorted(path.rglob("*.md"))
    for page in pages:
        in_code = False
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                    continue
                resolved = (page.parent / target.split("#", 1)[0]).resolve()
                if not resolved.exists() or root.resolve() not in [resolved, *resolved.parents]:
                    problems.append(f"{page.relative_to(root)}:{number}: {target}")
    return problems


def readme_too_long(root: Path, limit: int = 10 * 1024) -> list[str]:
    size = (root / "README.md").stat().st_size
    return [f"README.md: {size} bytes; keep it under {limit} (details belong in docs/)"] * (size >= limit)


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    problems = broken_links(root) + readme_too_long(root)
    print("\n".join(problems), end="\n" if problems else "")
    return int(bool(problems))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
