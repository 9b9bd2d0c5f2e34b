#!/usr/bin/python3
"""check-prom.py - validates Prometheus text exposition format (0.0.4).

usage: check-prom.py [--labels a,b,...] [--expect FILE] TEXTFILE...

Checks what a scraper relies on: metric and label name grammar, label value
escapes, one HELP and one TYPE per family before its samples, each family's
samples in one group, no duplicate series, counters named *_total and never
negative, histograms with ascending le, cumulative buckets, a +Inf bucket
equal to _count, and _sum. --labels: every sample carries these labels.
--expect FILE: lines "name{label="v",...} [==|>=|<=] VALUE": the sum of the
samples of name whose labels include those given compares so (over every
TEXTFILE together). Exit 0 when all holds, 1 otherwise (each problem printed).
"""
import math
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
errors = []


def err(where, text):
    errors.append("%s: %s" % (where, text))


def parse_value(s):
    if s in ("+Inf", "Inf"):
        return math.inf
    if s == "-Inf":
        return -math.inf
    if s == "NaN":
        return math.nan
    return float(s)


def parse_labels(s, where):
    """s starts after '{'; returns (labels dict, rest after '}')."""
    labels = {}
    i = 0
    while True:
        if s[i:i + 1] == "}":
            return labels, s[i + 1:]
        m = LABEL.match(s, i)
        if not m:
            raise ValueError("bad label name at %r" % s[i:i + 20])
        name = m.group(0)
        i = m.end()
        if s[i:i + 2] != '="':
            raise ValueError("label %s: expected =\"" % name)
        i += 2
        val = []
        while True:
            c = s[i:i + 1]
            if c == "":
                raise ValueError("label %s: unterminated value" % name)
            if c == "\\":
                e = s[i + 1:i + 2]
                if e not in ("\\", '"', "n"):
                    raise ValueError("label %s: bad escape \\%s" % (name, e))
                val.append("\n" if e == "n" else e)
                i += 2
                continue
            if c == '"':
                i += 1
                break
            val.append(c)
            i += 1
        if name in labels:
            raise ValueError("label %s twice" % name)
        labels[name] = "".join(val)
        if s[i:i + 1] == ",":
            i += 1


def parse_sample(line, where):
    m = NAME.match(line)
    if not m:
        raise ValueError("bad metric name")
    name = m.group(0)
    rest = line[m.end():]
    labels = {}
    if rest.startswith("{"):
        labels, rest = parse_labels(rest[1:], where)
    parts = rest.split()
    if not rest.startswith(" ") or len(parts) not in (1, 2):
        raise ValueError("expected ' VALUE [TIMESTAMP]'")
    value = parse_value(parts[0])
    if len(parts) == 2:
        int(parts[1])
    return name, labels, value


def family_of(name, types):
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[:-len(suffix)]
        if name.endswith(suffix) and types.get(base) == "histogram":
            return base
    return name


def check_histograms(path, samples, types):
    groups = {}
    for name, labels, value, lineno in samples:
        fam = family_of(name, types)
        if types.get(fam) != "histogram":
            continue
        key = (fam, tuple(sorted((k, v) for k, v in labels.items() if k != "le")))
        g = groups.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if name.endswith("_bucket"):
            if "le" not in labels:
                err("%s:%d" % (path, lineno), "%s without le" % name)
                continue
            g["buckets"].append((parse_value(labels["le"]), value, lineno))
        elif name.endswith("_sum"):
            g["sum"] = value
        else:
            g["count"] = value
    for (fam, key), g in groups.items():
        where = "%s: %s%s" % (path, fam, dict(key))
        b = g["buckets"]
        if not b or b[-1][0] != math.inf:
            err(where, "no +Inf bucket (last)")
            continue
        for (le0, v0, _), (le1, v1, ln) in zip(b, b[1:]):
            if not le1 > le0:
                err("%s:%d" % (path, ln), "%s: le %g after %g (must ascend)" % (fam, le1, le0))
            if v1 < v0:
                err("%s:%d" % (path, ln), "%s: bucket le=%g holds %g < %g (not cumulative)"
                    % (fam, le1, v1, v0))
        if g["count"] is None or g["sum"] is None:
            err(where, "missing _count or _sum")
        elif b[-1][1] != g["count"]:
            err(where, "+Inf bucket %g != _count %g" % (b[-1][1], g["count"]))


def check_file(path, want_labels):
    types, helps, seen_series, done_families = {}, {}, set(), set()
    samples = []
    current = None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    else:
        err(path, "text does not end with a newline")
    for lineno, line in enumerate(lines, 1):
        where = "%s:%d" % (path, lineno)
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not NAME.fullmatch(name):
                    err(where, "bad metric name %r" % name)
                table = helps if parts[1] == "HELP" else types
                if name in table:
                    err(where, "second %s for %s" % (parts[1], name))
                if name in done_families:
                    err(where, "%s %s after its samples" % (parts[1], name))
                if parts[1] == "TYPE":
                    if len(parts) != 4 or parts[3] not in TYPES:
                        err(where, "bad TYPE line")
                        continue
                    table[name] = parts[3]
                else:
                    table[name] = parts[3] if len(parts) == 4 else ""
                if current is not None and current != name:
                    done_families.add(current)
                current = name
            continue
        if line.strip() == "":
            continue
        try:
            name, labels, value = parse_sample(line, where)
        except ValueError as e:
            err(where, "%s: %r" % (e, line))
            continue
        fam = family_of(name, types)
        if fam not in types:
            err(where, "sample of %s before (or without) its TYPE" % fam)
        if fam in done_families:
            err(where, "samples of %s are not in one group" % fam)
        if current is not None and current != fam:
            done_families.add(current)
        current = fam
        series = (name, tuple(sorted(labels.items())))
        if series in seen_series:
            err(where, "duplicate series %s%s" % (name, labels))
        seen_series.add(series)
        if types.get(fam) == "counter":
            if not name.endswith("_total"):
                err(where, "counter %s is not named *_total" % name)
            if not value >= 0:
                err(where, "counter %s is %g" % (name, value))
        for label in want_labels:
            if label not in labels:
                err(where, "%s has no label %s" % (name, label))
        samples.append((name, labels, value, lineno))
    for name in types:
        if name not in helps:
            err(path, "%s has a TYPE but no HELP" % name)
    check_histograms(path, samples, types)
    return samples, len(types)


def check_expect(expect_path, samples):
    rx = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(==|>=|<=)?\s*(\S+)$")
    with open(expect_path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = rx.match(line)
            where = "%s:%d" % (expect_path, lineno)
            if not m:
                err(where, "cannot read %r" % line)
                continue
            name, lab, op, want = m.group(1), m.group(2), m.group(3) or "==", float(m.group(4))
            labels = parse_labels(lab[1:], where)[0] if lab else {}
            got = sum(v for n, l, v, _ in samples
                      if n == name and all(l.get(k) == x for k, x in labels.items()))
            ok = {"==": got == want, ">=": got >= want, "<=": got <= want}[op]
            if not ok:
                err(where, "%s%s is %g, expected %s %g" % (name, lab or "", got, op, want))


def main(argv):
    want_labels, expect, files = [], None, []
    i = 0
    while i < len(argv):
        if argv[i] == "--labels":
            want_labels = [x for x in argv[i + 1].split(",") if x]
            i += 2
        elif argv[i] == "--expect":
            expect = argv[i + 1]
            i += 2
        elif argv[i] in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            files.append(argv[i])
            i += 1
    if not files:
        print(__doc__, file=sys.stderr)
        return 2
    everything = []
    for path in files:
        before = len(errors)
        samples, families = check_file(path, want_labels)
        everything += samples
        if len(errors) == before:
            print("ok: %s: %d families, %d samples" % (path, families, len(samples)))
    if expect:
        check_expect(expect, everything)
    for e in errors:
        print("FAIL " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
