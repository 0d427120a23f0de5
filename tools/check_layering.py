#!/usr/bin/env python3
"""Fails (exit 1) when the product's include graph breaks its layering.

The product is built in layers, lowest first (docs/architecture.md):

    common <- provenance <- plan <- cache <- transport
           <- fs/config <- fs/dataset <- fs/views <- fs/namespace <- fs/kernel <- fs/daemon

A file may include headers of its own layer and of layers to its left, never
of a layer to its right. client/ (libdlfs-client, for third-party loaders)
stands alone: it may include only client/ headers. Within fs/, no two modules (a .h and its .cc are one
module) may include each other, directly or through others: such a loop means
two concepts that cannot be understood, or tested, one without the other.
(provenance/ has one such loop, Manifest::build and the format table it
dispatches to, outside this check's scope for now.) Run at every build
(meson.build) and as a unit test.

Usage: check_layering.py SOURCE_ROOT [--stamp FILE]
"""
import argparse
import os
import re
import sys

LAYERS = ["common", "provenance", "plan", "cache", "transport",
          "fs/config", "fs/dataset", "fs/views", "fs/namespace", "fs/kernel", "fs/daemon"]
CYCLE_SCOPE = "fs/"  # where module loops are refused
STANDALONE = ["client"]  # may include only their own headers
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    """The index of the layer a project-relative path belongs to, else None."""
    best = None
    for i, layer in enumerate(LAYERS):
        if path.startswith(layer + "/") and (best is None or len(layer) > len(LAYERS[best])):
            best = i
    return best


def product_files(root):
    for layer in LAYERS + STANDALONE:
        for d, _, files in os.walk(os.path.join(root, layer)):
            for f in files:
                if f.endswith((".h", ".cc")):
                    yield os.path.relpath(os.path.join(d, f), root)


def module_of(path):
    return os.path.splitext(path)[0]


def loops(graph):
    """The strongly connected groups of more than one module (Tarjan)."""
    index, low, on_stack, stack, groups = {}, {}, set(), [], []

    def visit(m):
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for n in sorted(graph.get(m, ())):
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on_stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            group = []
            while True:
                n = stack.pop()
                on_stack.discard(n)
                group.append(n)
                if n == m:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    return groups


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", help="the source tree's top")
    ap.add_argument("--stamp", help="written when the check passes (for the build)")
    a = ap.parse_args()

    errors = []
    graph = {}
    for path in sorted(product_files(a.root)):
        with open(os.path.join(a.root, path), encoding="utf-8") as f:
            text = f.read()
        mine = layer_of(path)
        if mine is None:  # a STANDALONE directory
            own = path.split("/")[0]
            for inc in INCLUDE.findall(text):
                if layer_of(inc) is not None or (inc.split("/")[0] in STANDALONE and not inc.startswith(own + "/")):
                    errors.append(f"{path}: includes {inc}: {own}/ stands alone (it may include only {own}/ headers)")
            continue
        if path.startswith(CYCLE_SCOPE):
            graph.setdefault(module_of(path), set())
        for inc in INCLUDE.findall(text):
            theirs = layer_of(inc)
            if theirs is None:
                continue  # a test helper or a system header spelled with quotes
            if theirs > mine:
                errors.append(f"{path}: includes {inc}: {LAYERS[theirs]}/ is above {LAYERS[mine]}/ "
                              f"(lower layers never include upper ones)")
            if path.startswith(CYCLE_SCOPE) and inc.startswith(CYCLE_SCOPE) and module_of(inc) != module_of(path):
                graph[module_of(path)].add(module_of(inc))
    for group in loops(graph):
        errors.append("modules that include each other: " + ", ".join(group))
    for e in errors:
        print("layering: " + e, file=sys.stderr)
    if errors:
        return 1
    if a.stamp:
        with open(a.stamp, "w") as f:
            f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
