#!/usr/bin/env python3
"""No two source files of a crate import each other.

For every crate of the workspace, each `.rs` file under `src/` is a module; a file imports
another when its `use` items or inline paths (`crate::a::b`, `super::x`, `self::y`) name
something that lives in the other file. Declaring a child (`mod x;`) and re-exporting it
(`pub use x::Y;`) are a module's public face, not an import, so a parent that only
re-exports its children is no circle. Test code (`tests.rs`, `*_tests.rs`, and everything
after `#[cfg(test)]` in a file) is left out: a test may reach anywhere.

Prints each pair that imports each other and exits 1 when there is one.

    scripts/check-imports.py            # the whole workspace
    scripts/check-imports.py core/src   # one crate
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
USE = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?use\s+([^;]+);", re.M)
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")


def modules(src):
    """Module path (tuple) -> file, for every file of the crate rooted at `src`."""
    found = {}
    for file in src.rglob("*.rs"):
        parts = list(file.relative_to(src).with_suffix("").parts)
        if parts[-1] in ("lib", "main", "mod"):
            parts.pop()
        if parts and (parts[-1] == "tests" or parts[-1].endswith("_tests")):
            continue
        if "bin" in parts[:1]:
            continue
        found[tuple(parts)] = file
    return found


def expand(tree):
    """`a::{b, c::{d}}` -> ['a::b', 'a::c::d']."""
    tree = re.sub(r"\s+", "", tree)
    depth, start = 0, None
    for i, ch in enumerate(tree):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                prefix, inner, rest = tree[:start], tree[start + 1 : i], tree[i + 1 :]
                items, level, last = [], 0, 0
                for j, c in enumerate(inner + ","):
                    level += c == "{"
                    level -= c == "}"
                    if c == "," and level == 0:
                        if inner[last:j]:
                            items.append(inner[last:j])
                        last = j + 1
                return [p for item in items for p in expand(prefix + item + rest)]
    return [tree.split(" as ")[0]]


def target(here, path, mods):
    """The file `path` (as written in module `here`) lives in, or None (another crate)."""
    parts = path.split("::")
    if parts[0] == "crate":
        base, parts = (), parts[1:]
    elif parts[0] in ("super", "self"):
        base = list(here)
        while parts and parts[0] in ("super", "self"):
            if parts.pop(0) == "super":
                base = base[:-1]
        base = tuple(base)
    else:
        return None
    parts = [p for p in parts if p not in ("*", "self")]
    for n in range(len(parts), -1, -1):
        candidate = base + tuple(parts[:n])
        if candidate in mods:
            return mods[candidate]
    return None


def check(src):
    mods = modules(src)
    edges = {}
    for here, file in mods.items():
        text = file.read_text()
        cut = text.find("#[cfg(test)]")
        text = text if cut < 0 else text[:cut]
        text = re.sub(r"//[^\n]*", "", text)
        paths = set()
        for m in USE.finditer(text):
            if m.group(1) and m.group(1).startswith("pub"):
                continue  # a re-export: the module's public face
            paths.update(expand(m.group(3)))
        body = USE.sub("", text)
        paths.update(m.group(0) for m in PATH.finditer(body))
        for path in paths:
            other = target(here, path, mods)
            if other is not None and other != file:
                edges.setdefault(file, set()).add(other)
    circles = sorted(
        {tuple(sorted((a, b))) for a, outs in edges.items() for b in outs if a in edges.get(b, ())}
    )
    return circles


def main():
    roots = [ROOT / a for a in sys.argv[1:]] or sorted(ROOT.glob("*/src"))
    circles = [c for src in roots for c in check(src)]
    for a, b in circles:
        print(f"{a.relative_to(ROOT)} <-> {b.relative_to(ROOT)}")
    if circles:
        print(f"{len(circles)} pair(s) of files import each other", file=sys.stderr)
        return 1
    print(f"no two source files import each other ({len(roots)} crates)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
