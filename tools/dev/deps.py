#!/usr/bin/env python3
"""deps.py - the dependency shape of a source folder (issue 16).

    tools/dev/deps.py [--floors FILE] DIR...

For the .c and .h files under each DIR it prints: files and lines per floor,
the largest file and function, the circles (strongly connected components of
more than one file) of the include graph and of the call graph, and every
call from a lower floor to a higher one.

A file's module is its name without .c/.h (x.c and x.h are one module).
Call graph: module A -> module B when A's code names a function that B
defines (a call, or a callback handed on); in a header only the bodies of
inline functions count, not prototypes. Include graph: A -> B when A.c or
A.h includes B.h. The floor of a file is its folder under DIR (src/core/room/x.c
is on floor "room"); --floors FILE maps module names to floors instead
(lines "module floor"), for a flat folder. The order of floors is that of
FLOORS below, or the order of first appearance in FILE.
"""
import os
import re
import sys

FLOORS = ['base', 'ctx', 'link', 'xfer', 'room', 'agree', 'setup', 'api']


def strip(text):
    text = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), text, flags=re.S)
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"'(\\.|[^'\\\n])*'", "''", text)
    return text


def functions(code):
    """(name, first line, last line, is_static) of each function defined in code"""
    out = []
    lines = code.split('\n')
    i = 0
    while i < len(lines):
        m = re.match(r'^(?!typedef|struct\s+\w+\s*\{|enum|#)([A-Za-z_][^;{}()]*?)\b(\w+)\s*\(', lines[i])
        if m and not lines[i].startswith(' '):
            j = i
            while j < len(lines) and '{' not in lines[j] and ';' not in lines[j]:
                j += 1
            if j < len(lines) and '{' in lines[j] and ';' not in lines[j].split('{')[0]:
                k = j
                while k < len(lines) and not lines[k].startswith('}'):
                    k += 1
                out.append((m.group(2), i + 1, k + 1, 'static' in m.group(1) and 'inline' not in m.group(1)))
                i = k + 1
                continue
        i += 1
    return out


def scc(nodes, edges):
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
            comps.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return [c for c in comps if len(c) > 1]


def main(argv):
    floors_file = None
    if len(argv) > 2 and argv[1] == '--floors':
        floors_file, argv = argv[2], [argv[0]] + argv[3:]
    order = list(FLOORS)
    fmap = {}
    if floors_file:
        order = []
        for line in open(floors_file):
            if line.strip() and not line.startswith('#'):
                mod, fl = line.split()[:2]
                fmap[mod] = fl
                if fl not in order:
                    order.append(fl)
    for top in argv[1:]:
        report(top.rstrip('/'), order, fmap)


def report(top, order, fmap):
    files = []
    for d, _, names in os.walk(top):
        files += [os.path.join(d, x) for x in sorted(names) if x.endswith(('.c', '.h'))]
    files.sort()
    mod = {f: os.path.basename(f)[:-2] for f in files}
    rel = {f: os.path.relpath(os.path.dirname(f), top) for f in files}
    floor = {}
    for f in files:
        if fmap:
            floor[f] = fmap.get(mod[f], '?')
        else:
            floor[f] = rel[f].split(os.sep)[0] if rel[f] != '.' else '.'
    code = {f: strip(open(f).read()) for f in files}
    nlines = {f: open(f).read().count('\n') for f in files}
    defs = {}  # function name -> module that defines it (non-static)
    funcs = []
    for f in files:
        for name, a, b, static in functions(code[f]):
            funcs.append((b - a + 1, name, f))
            if not static:
                defs.setdefault(name, mod[f])
    modfloor = {}
    for f in files:
        modfloor.setdefault(mod[f], floor[f])
    print('== %s' % top)
    print('files and lines per floor:')
    seen = sorted(set(floor.values()), key=lambda x: (order.index(x) if x in order else 99, x))
    for fl in seen:
        fs = [f for f in files if floor[f] == fl]
        print('  %-6s %3d files %6d lines' % (fl, len(fs), sum(nlines[f] for f in fs)))
    print('  total  %3d files %6d lines' % (len(files), sum(nlines.values())))
    big = max(files, key=lambda f: nlines[f])
    print('largest file: %s (%d lines)' % (big, nlines[big]))
    funcs.sort(reverse=True)
    print('largest functions: ' + ', '.join('%s (%s, %d lines)' % (n, os.path.basename(f), l)
                                             for l, n, f in funcs[:3]))
    # include graph between modules
    inc = {}
    for f in files:
        for h in re.findall(r'#include\s+"([^"]+)\.h"', open(f).read()):
            m = os.path.basename(h)
            cand = [g for g in files if g.endswith('/' + h + '.h') or (mod[g] == m and g.endswith('.h') and '/' not in h)]
            if cand and m != mod[f]:
                inc.setdefault(mod[f], set()).add(m)
    mods = sorted(set(mod.values()))
    cyc = scc(mods, inc)
    print('include circles: %d' % len(cyc) + ''.join('\n  ' + ' '.join(c) for c in cyc))
    # call graph
    calls, up = {}, []
    for f in files:
        body = code[f]
        if f.endswith('.h'):
            # a header's prototypes name its module's functions; only the
            # bodies of its inline functions call
            lines = body.split('\n')
            body = '\n'.join('\n'.join(lines[a - 1:b]) for _, a, b, _ in functions(body))
        for name in sorted(set(re.findall(r'(?<![.>\w])([A-Za-z_]\w*)\b', body))):
            m = defs.get(name)
            if m is None or m == mod[f]:
                continue
            calls.setdefault(mod[f], set()).add(m)
            lo, hi = floor[f], modfloor[m]
            if lo in order and hi in order and order.index(hi) > order.index(lo):
                up.append('%s (%s) -> %s (%s): %s' % (os.path.relpath(f, top), lo, m, hi, name))
    cyc = scc(mods, calls)
    print('call circles: %d' % len(cyc) + ''.join('\n  %d files: %s' % (len(c), ' '.join(c)) for c in cyc))
    print('upward calls: %d' % len(up) + ''.join('\n  ' + u for u in up))


if __name__ == '__main__':
    main(sys.argv)
