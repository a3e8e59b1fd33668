#!/usr/bin/env python3
"""The values table of helm/mcp-harbor/README.md, generated from values.yaml.

  python3 helm/values_table.py            # print the table
  python3 helm/values_table.py --write    # replace it in README.md (between the markers)

A row per value: its key, its default and the comment written directly above it in values.yaml
(blank lines end a comment; a comment above a section describes the section's row). A value is a
leaf where values.schema.json stops naming properties (resources, annotations, label maps are
one row each). helm/check.py fails when README.md's table is not what this prints, or when a leaf
has no description of its own or from a section above it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

CHART = Path(__file__).resolve().parent / "mcp-harbor"
START, END = "<!-- values-table:start -->", "<!-- values-table:end -->"
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_]+):(?P<rest>.*)$")
DEFAULT_WIDTH = 60


def comments_by_key(text: str) -> dict[str, str]:
    """Each key path (a.b.c) and the comment block directly above its line, joined."""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    block_indent = None  # inside a block scalar (`key: |`): lines indented deeper are its text
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if block_indent is not None:
            if not line.strip() or indent > block_indent:
                continue
            block_indent = None
        stripped = line.strip()
        if not stripped:
            pending = []
            continue
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
            continue
        match = KEY_LINE.match(line)
        if not match:  # a list item or a free-form map's key
            pending = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [match["key"]])
        stack.append((indent, match["key"]))
        if pending:
            found[path] = " ".join(pending)
        pending = []
        if match["rest"].strip() in ("|", "|-", ">", ">-"):
            block_indent = indent
    return found


def rows(chart: Path = CHART) -> list[tuple[str, object, bool]]:
    """(key, default, is_leaf) for every section and leaf of values.yaml, in file order."""
    values = yaml.safe_load((chart / "values.yaml").read_text())
    schema = json.loads((chart / "values.schema.json").read_text())
    out: list[tuple[str, object, bool]] = []

    def walk(value: object, node: dict, prefix: str) -> None:
        props = node.get("properties")
        if isinstance(value, dict) and props:
            if prefix:
                out.append((prefix, value, False))
            for key, child in value.items():
                walk(child, props.get(key, {}), f"{prefix}.{key}" if prefix else key)
        else:
            out.append((prefix, value, True))

    walk(values, schema, "")
    return out


def default_text(value: object) -> str:
    if isinstance(value, str) and "\n" in value:
        return "(TOML, see values.yaml)"
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    text = text.removesuffix("\n...").removesuffix("...").strip()
    if len(text) > DEFAULT_WIDTH:
        text = text[: DEFAULT_WIDTH - 1] + "…"
    return text


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(chart: Path = CHART) -> str:
    comments = comments_by_key((chart / "values.yaml").read_text())
    lines = ["| key | default | description |", "|-----|---------|-------------|"]
    for key, value, leaf in rows(chart):
        description = comments.get(key, "")
        if not leaf and not description:
            continue
        default = f"`{cell(default_text(value))}`" if leaf else ""
        lines.append(f"| `{key}` | {default} | {cell(description)} |")
    return "\n".join(lines) + "\n"


def undescribed(chart: Path = CHART) -> list[str]:
    """Leaves with no comment of their own nor one on a section above them."""
    comments = comments_by_key((chart / "values.yaml").read_text())
    missing = []
    for key, _, leaf in rows(chart):
        parts = key.split(".")
        if leaf and not any(".".join(parts[:i]) in comments for i in range(len(parts), 0, -1)):
            missing.append(key)
    return missing


def readme_table(readme: str) -> str | None:
    if START not in readme or END not in readme:
        return None
    return readme.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def main() -> int:
    readme_path = CHART / "README.md"
    generated = table()
    if "--write" not in sys.argv[1:]:
        sys.stdout.write(generated)
        return 0
    readme = readme_path.read_text()
    if readme_table(readme) is None:
        sys.exit(f"{readme_path}: no {START} … {END} markers")
    head, rest = readme.split(START, 1)
    tail = rest.split(END, 1)[1]
    readme_path.write_text(f"{head}{START}\n{generated}{END}{tail}")
    print(f"wrote the values table of {readme_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
