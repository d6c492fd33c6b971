#!/usr/bin/env python3
"""Checks that every C++ block of docs/tutorial*.md is code from a compiled example.

Each ```cpp block must follow a marker line naming a source file and a region:

    <!-- snippet: examples/train_template.cpp device-variable -->
    ```cpp
    ...
    ```

and equal that region, dedented. A region is marked in the source with
comment lines of their own:

    // [tutorial:device-variable]
    ...
    // [end]

Regions may nest; `// [end]` closes the innermost one, and marker lines
never appear in a snippet. Other blocks (```sh, ```text) are free text.

    scripts/check-tutorial.py           exit 1 naming each block that differs
    scripts/check-tutorial.py --write   refresh the blocks from the sources
"""
import argparse
import pathlib
import re
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- snippet: (\S+) (\S+) -->$")
BEGIN = re.compile(r"^\s*// \[tutorial:([\w-]+)\]\s*$")
END = re.compile(r"^\s*// \[end\]\s*$")


class Problem(Exception):
    pass


CPP_FENCE = re.compile(r"^\s*```\s*(cpp|c\+\+|cxx|cc)\s*$", re.IGNORECASE)

def regions(source):
    """{name: text} of the marked regions of a source file."""
    path = ROOT / source
    if not path.is_file():
        raise Problem(f"{source}: no such file")
    found, open_regions = {}, []  # open_regions: [(name, first line number, lines)]
    for number, line in enumerate(path.read_text().splitlines(), 1):
        begin = BEGIN.match(line)
        if begin:
            if begin.group(1) in found or any(r[0] == begin.group(1) for r in open_regions):
                raise Problem(f"{source}:{number}: region '{begin.group(1)}' is marked twice")
            open_regions.append((begin.group(1), number, []))
        elif END.match(line):
            if not open_regions:
                raise Problem(f"{source}:{number}: '// [end]' without a region to close")
            name, _, lines = open_regions.pop()
            found[name] = textwrap.dedent("\n".join(lines)).strip("\n")
        else:
            for _, _, lines in open_regions:
                lines.append(line)
    if open_regions:
        name, number, _ = open_regions[-1]
        raise Problem(f"{source}:{number}: region '{name}' has no '// [end]'")
    return found


def check(doc, write, cache):
    """Problems found in one document; rewrites it when write is set."""
    lines = doc.read_text().splitlines()
    out, problems, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        # Every C++ fence counts (```cpp, ```c++, ```C++, indented or not).
        if not CPP_FENCE.match(line):
            continue
        where = f"{doc.relative_to(ROOT)}:{i}"
        body_start = i
        while i < len(lines) and lines[i].strip() != "```":
            i += 1
        if i == len(lines):
            problems.append(f"{where}: the cpp block is not closed")
            out.extend(lines[body_start:])
            break
        body = "\n".join(lines[body_start:i])
        previous = next((l for l in reversed(out[:-1]) if l.strip()), "")
        marker = MARKER.match(previous)
        if not marker:
            problems.append(f"{where}: a cpp block without a '<!-- snippet: FILE REGION -->' line before it")
            out.extend(lines[body_start:i])
            continue
        source, name = marker.groups()
        try:
            if source not in cache:
                cache[source] = regions(source)
            if name not in cache[source]:
                raise Problem(f"{source} has no region '{name}' (it has: {', '.join(sorted(cache[source]))})")
            expected = cache[source][name]
        except Problem as e:
            problems.append(f"{where}: {e}")
            out.extend(lines[body_start:i])
            continue
        if body != expected:
            if write:
                print(f"{where}: refreshed from {source} [{name}]")
            else:
                problems.append(f"{where}: the block differs from {source} region '{name}' "
                                f"(run scripts/check-tutorial.py --write)")
        out.extend(expected.split("\n") if write else lines[body_start:i])
    if write:
        doc.write_text("\n".join(out) + "\n")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="refresh the blocks from the sources")
    parser.add_argument("docs", nargs="*", help="documents to check (default: docs/tutorial*.md)")
    args = parser.parse_args()
    docs = [pathlib.Path(d).resolve() for d in args.docs] or sorted((ROOT / "docs").glob("tutorial*.md"))
    if not docs:
        print("no docs/tutorial*.md to check", file=sys.stderr)
        return 1
    cache, problems, blocks = {}, [], 0
    for doc in docs:
        blocks += sum(1 for l in doc.read_text().splitlines() if CPP_FENCE.match(l))
        problems += check(doc, args.write, cache)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print(f"{blocks} cpp blocks in {len(docs)} documents match the examples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
