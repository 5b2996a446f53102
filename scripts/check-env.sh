#!/usr/bin/env bash
# The library reads its environment through one table
# (lib/util/param_table.h; docs/design.md, "Configuration"):
#   - no getenv() in lib/ outside the table's reader (param_table.c) and
#     the accessor of other programs' variables (launcher_env.c);
#   - every TNT_* name inside a string literal in lib/ is a table entry
#     or a C name of the headers (a macro or enumerator such as TNT_MAX),
#     so no variable is read, or named in a message, without its entry.
# Comment lines (starting with /*, * or //) are skipped.
# Usage: scripts/check-env.sh
set -euo pipefail
cd "$(dirname "$0")/.."

table=lib/util/param_table.h
readers="lib/util/param_table.c lib/util/launcher_env.c"
code_lines() { # file: its lines that are not comment lines, as FILE:N:TEXT
    awk -v f="$1" '!/^[[:space:]]*(\/\*|\*|\/\/)/ {print f ":" FNR ":" $0}' "$1"
}

bad=0
names=$(sed -n 's/^[[:space:]]*X([A-Z0-9_]*, *"\(TNT_[A-Z0-9_]*\)".*/\1/p' "$table")
[ -n "$names" ] || { echo "check-env: no entries found in $table"; exit 2; }
c_names=$(cat include/tnt/*.h $(find lib -name '*.h') |
          sed -n -e 's/^[[:space:]]*#[[:space:]]*define[[:space:]]\{1,\}\(TNT_[A-Z0-9_]*\).*/\1/p' \
                 -e 's/^[[:space:]]*\(TNT_[A-Z0-9_]*\)[[:space:]]*[=,].*/\1/p' | sort -u)

while IFS= read -r f; do
    case " $readers " in *" $f "*) is_reader=1 ;; *) is_reader=0 ;; esac
    while IFS= read -r line; do
        if [ $is_reader = 0 ] && grep -qE 'getenv[[:space:]]*\(' <<<"${line#*:*:}"; then
            echo "check-env: ${line%%:*}:$(cut -d: -f2 <<<"$line"): getenv() outside the table of variables (use tnt__env*, lib/util/param_table.h)"
            bad=1
        fi
        [ "$f" = "$table" ] && continue
        for tok in $(grep -oE '"([^"\\]|\\.)*"' <<<"${line#*:*:}" | grep -oE 'TNT_[A-Z0-9_]+' || true); do
            if ! grep -qxF "$tok" <<<"$names" && ! grep -qxF "$tok" <<<"$c_names"; then
                echo "check-env: ${line%%:*}:$(cut -d: -f2 <<<"$line"): \"$tok\" is no entry of $table"
                bad=1
            fi
        done
    done < <(code_lines "$f" | grep -E 'getenv|"[^"]*TNT_' || true)
done < <(find lib -name '*.[ch]' | sort)

if [ $bad = 0 ]; then
    echo "check-env: ok"
fi
exit $bad
