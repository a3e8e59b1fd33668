#!/usr/bin/env python3
"""Import cycles between modules, at every level of src/: the top-level rooms (protocol,
session, transport, …) and, inside each room that is a directory, its own modules (session/core,
session/actor, …). A cycle means a lower module reaches up into a higher one (DESIGN.md "Code
shape"). Reads `crate::…`, `super::…` and `self::…` paths as text; unit-test modules
(`#[cfg(test)] mod tests { … }` at the end of a file) are left out.

usage: scripts/module-cycles.py [PROJECT_ROOT]   (prints each cycle; exit 1 when there is one)"""
import os
import re
import sys

ROOT = os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "src")
TESTS = re.compile(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{.*", re.S)
PATH = re.compile(r"\b((?:crate|super|self)(?:::\w+)+)")
GROUP = re.compile(r"\b((?:crate|super|self)(?:::\w+)*)::\{([^}]*)\}", re.S)


def children(directory):
    """The modules directly inside `directory` (files and folders), by name."""
    names = set()
    for n in os.listdir(directory):
        full = os.path.join(directory, n)
        if n.endswith(".rs") and n not in ("lib.rs", "main.rs", "mod.rs"):
            names.add(n[:-3])
        elif os.path.isdir(full) and not n.startswith("."):
            names.add(n)
    return names


def module_path(file):
    """`src/session/core/mod.rs` -> ["session", "core"]."""
    rel = os.path.relpath(file, ROOT)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return rel


def resolve(path, here):
    """The absolute module path (a list) that a `crate::`/`super::`/`self::` path in module
    `here` names."""
    parts = path.split("::")
    if parts[0] == "crate":
        return parts[1:]
    base = list(here)
    if parts[0] == "self":
        return base + parts[1:]
    while parts and parts[0] == "super":
        base, parts = base[:-1], parts[1:]
    return base + parts


def uses(file):
    text = open(file, encoding="utf-8", errors="replace").read()
    text = TESTS.sub("", text)
    text = re.sub(r"//[^\n]*", "", text)
    found = set(PATH.findall(text))
    for prefix, group in GROUP.findall(text):
        for item in group.split(","):
            item = item.strip()
            if item:
                found.add(prefix + "::" + item.split("::")[0].split(" as ")[0].strip())
    return found


def cycles_in(level):
    """Cycles among the child modules of `level` (a module path; [] is src/ itself)."""
    directory = os.path.join(ROOT, *level)
    mods = children(directory)
    edges = {}
    for dirpath, _, files in os.walk(directory):
        for f in files:
            if not f.endswith(".rs"):
                continue
            file = os.path.join(dirpath, f)
            here = module_path(file)
            if here[: len(level)] != level or len(here) <= len(level):
                continue
            top = here[len(level)]
            if top not in mods:
                continue
            for path in uses(file):
                target = resolve(path, here)
                if target[: len(level)] != level or len(target) <= len(level):
                    continue
                to = target[len(level)]
                if to in mods and to != top:
                    edges.setdefault((top, to), os.path.relpath(file, os.path.dirname(ROOT)))
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for comp in comps:
        name = "/".join(level) or "src"
        out.append(f"{name}: modules that import each other: " + ", ".join(comp))
        for (a, b), where in sorted(edges.items()):
            if a in comp and b in comp:
                out.append(f"  {a} -> {b}   (e.g. {where})")
    return out


def levels():
    yield []
    for dirpath, dirs, _ in os.walk(ROOT):
        dirs.sort()
        for d in dirs:
            yield module_path(os.path.join(dirpath, d, "mod.rs"))


found = [line for level in levels() for line in cycles_in(level)]
print("\n".join(found))
sys.exit(1 if found else 0)
