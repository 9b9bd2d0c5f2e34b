#!/bin/sh
# gen-env.sh TEMPLATE VERSION < kvx-info-c-output - writes kvx(7): TEMPLATE
# with @VERSION@ replaced and @ENVIRONMENT@ replaced by one .TP entry per
# variable of `kvx-info -c`, so the list is never written twice.
set -eu
template=$1
version=$2
env=$(awk '
    function roff(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); sub(/^[.'"'"']/, "\\\\\\&&", s); return s }
    /^# [0-9]+ kvx configuration variables/ { next }
    /^#$/ { help = ""; form = ""; next }
    /^#   type / { form = substr($0, 5); next }
    /^# / { help = (help == "" ? "" : help " ") substr($0, 3); next }
    /^KVX_[A-Z0-9_]*=/ {
        name = $0; sub(/=.*/, "", name)
        def = $0; sub(/^[^=]*=/, "", def); sub(/    # (default|set in the environment)$/, "", def)
        print ".TP"
        print ".B " name
        print roff(help)
        print ".br"
        print roff(form) "; default: " (def == "" ? "(none)" : roff(def))
    }')
[ -n "$env" ] || { echo "gen-env.sh: no variable read from kvx-info -c" >&2; exit 1; }
while IFS= read -r line; do
    case $line in
    @ENVIRONMENT@) printf '%s\n' "$env" ;;
    *) printf '%s\n' "$line" | sed "s/@VERSION@/$version/g" ;;
    esac
done < "$template"
