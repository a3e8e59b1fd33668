#!/usr/bin/env python3
"""The source layout of CONTRIBUTING.md, made from the tree: every room of src/ (a top-level
module) and every module inside a room, each with the first sentence of its `//!` comment.

usage: scripts/layout.py            prints the layout
       scripts/layout.py --write    writes it into CONTRIBUTING.md (between the layout markers)
       scripts/layout.py --check    exit 1 when CONTRIBUTING.md's layout is not the tree's"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SRC = os.path.join(ROOT, "src")
DOC = os.path.join(ROOT, "CONTRIBUTING.md")
BEGIN, END = "<!-- layout:begin (scripts/layout.py --write) -->", "<!-- layout:end -->"
WIDTH = 100


def summary(path):
    """The first sentence of a file's leading `//!` comment."""
    lines = []
    for line in open(path, encoding="utf-8"):
        if not line.startswith("//!"):
            break
        text = line[3:].strip()
        if not text and lines:
            break
        lines.append(text)
    text = " ".join(lines)
    match = re.match(r"(.+?[.:])(\s|$)", text)
    return (match.group(1) if match else text).rstrip(".:")


def module_file(directory, name):
    """`name.rs`, or `name/mod.rs` for a module without a file of its own."""
    path = os.path.join(directory, name)
    return path + ".rs" if os.path.isfile(path + ".rs") else os.path.join(path, "mod.rs")


def entries(directory):
    names = set()
    for n in os.listdir(directory):
        if n.endswith(".rs") and n not in ("mod.rs", "lib.rs", "main.rs"):
            names.add(n[:-3])
        elif os.path.isdir(os.path.join(directory, n)):
            names.add(n)
    return sorted(names)


def wrap(prefix, text, indent):
    out, line = [], prefix
    for word in text.split():
        if len(line) + 1 + len(word) > WIDTH and line.strip():
            out.append(line.rstrip())
            line = " " * indent
        line += ("" if line.endswith(" ") else " ") + word
    out.append(line.rstrip())
    return out


def layout():
    lines = ["```"]
    for room in entries(SRC):
        path = module_file(SRC, room)
        name = f"src/{room}/" if os.path.isdir(os.path.join(SRC, room)) else f"src/{room}.rs"
        lines += wrap(f"{name:<22}", summary(path), 22)
        if os.path.isdir(os.path.join(SRC, room)):
            for module in entries(os.path.join(SRC, room)):
                sub = module_file(os.path.join(SRC, room), module)
                label = module + ("/" if os.path.isdir(os.path.join(SRC, room, module)) else "")
                lines += wrap(f"  {label:<20}", summary(sub), 22)
    lines.append("```")
    return "\n".join(lines) + "\n"


def main():
    if "--write" not in sys.argv and "--check" not in sys.argv:
        sys.stdout.write(layout())
        return
    text = open(DOC, encoding="utf-8").read()
    if BEGIN not in text or END not in text:
        sys.exit(f"{DOC} has no layout markers ({BEGIN} … {END})")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    generated = head + BEGIN + "\n" + layout() + END + tail
    if "--write" in sys.argv:
        open(DOC, "w", encoding="utf-8").write(generated)
    elif generated != text:
        sys.exit("CONTRIBUTING.md's layout is not the tree's: run scripts/layout.py --write")


main()
