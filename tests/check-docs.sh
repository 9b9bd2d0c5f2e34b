#!/bin/sh
# check-docs.sh - every option of a kvx tool that README.md, docs/, the man
# pages or the tools' own --help texts name is one the tool's --help lists,
# and every option a tool's man page describes too. A command written in the docs is read as the tool's
# name followed by its words up to a bare "--" (what follows goes to the
# launcher or the program) or the end of the command; words starting with
# "-" are the options checked.
set -u
: "${top_srcdir:?}" "${top_builddir:?}"

tools="kvx-info kvx-topo kvx-bench kvx-metrics kvx-demo kvx-run"
work=$(mktemp -d "${TMPDIR:-/tmp}/kvxt-docs.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
bad=0

binary() {
    case $1 in
    kvx-info | kvx-topo | kvx-bench | kvx-metrics) echo "$top_builddir/tools/$1" ;;
    kvx-demo) echo "$top_builddir/examples/$1" ;;
    kvx-run) echo "$top_srcdir/launch/$1" ;;
    esac
}
for t in $tools; do
    b=$(binary "$t")
    if [ ! -x "$b" ]; then
        echo "FAIL: $b is not built"
        exit 1
    fi
    "$b" --help >"$work/$t.help" 2>&1 || { echo "FAIL: $t --help exited $?"; bad=1; }
    grep -oE -- '(^|[^A-Za-z0-9-])--?[A-Za-z][A-Za-z0-9-]*' "$work/$t.help" |
        sed 's/^[^-]*//' | sort -u >"$work/$t.opts"
    [ -s "$work/$t.opts" ] || { echo "FAIL: $t --help lists no option"; bad=1; }
done

# The documents, with roff's escapes undone, and the tools' own help texts
# (which name each other's options too).
docs="$top_srcdir/README.md $(find "$top_srcdir/docs" -name '*.md' | sort) $(ls "$top_srcdir"/man/*.[0-9] "$top_srcdir"/man/*.in) $(ls "$work"/*.help)"
checked=0
for f in $docs; do
    sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\(em/ /g' "$f" |
        grep -oE "(kvx-info|kvx-topo|kvx-bench|kvx-demo|kvx-run)( +[^ \`|;()\"']+)*" |
        while read -r tool words; do
            for w in $words; do
                [ "$w" = -- ] && break
                case $w in
                -[A-Za-z]* | --[A-Za-z]*) ;;
                *) continue ;;
                esac
                o=${w%%=*}
                o=${o%[.,:]}
                if ! grep -qx -- "$o" "$work/$tool.opts"; then
                    echo "FAIL: $(basename "$f") names '$tool $o', which $tool --help does not list"
                    echo bad >>"$work/bad"
                fi
                echo >>"$work/checked"
            done
        done
done
# A tool's own man page: the options its OPTIONS entries describe.
for t in $tools; do
    page=$top_srcdir/man/$t.1
    [ -r "$page" ] || { echo "FAIL: no man page $page"; bad=1; continue; }
    awk 'prev == ".TP" && /^\.B[IR]? +\\-/ { print } { prev = $1 }' "$page" |
        sed -e 's/\\-/-/g' -e 's/"[^"]*"//g' -e 's/^\.B[IR]* //' | tr ', ' '\n\n' |
        grep -E '^-' | while read -r o; do
            if ! grep -qx -- "$o" "$work/$t.opts"; then
                echo "FAIL: $t.1 describes '$o', which $t --help does not list"
                echo bad >>"$work/bad"
            fi
            echo >>"$work/checked"
        done
done
# The reasons for the code belong in commit messages and tests: no issue
# numbers or session history in the sources, headers and user documents.
if grep -rniE '\bissues? [0-9]+|\bsession (of|20[0-9])' "$top_srcdir/src" "$top_srcdir/include" \
    "$top_srcdir/examples" "$top_srcdir/man" "$top_srcdir/docs/user" "$top_srcdir/README.md" \
    >"$work/history"; then
    echo "FAIL: history in the sources or user docs (say it in a commit message):"
    sed 's/^/    /' "$work/history"
    bad=1
fi
[ -f "$work/bad" ] && bad=1
n=$(wc -l <"$work/checked" 2>/dev/null || echo 0)
if [ "$n" -lt 50 ]; then
    echo "FAIL: only $n options found in the documents: is the scan broken?"
    bad=1
fi
[ $bad = 0 ] && echo "PASS: $n options named by the documents, each listed by its tool's --help"
exit $bad
