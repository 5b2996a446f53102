#!/usr/bin/env bash
# Draws allreduce results as one PNG with two panels, bus bandwidth and
# time against message size (log x), one labelled curve per run, so that
# tnt's curve can be laid beside any other. Reads `tnt-bench --json`
# files, CSV files (size_bytes,time_us,busbw_gbps[,label]) and the bench
# logs of the peers (/work/shared/peers: `gloo algo=... p=... bytes=...`
# and `mpi label=...` lines). Needs gnuplot (Debian: gnuplot-nox).
# See docs/tnt-bench.md, "Plotting results".
set -euo pipefail
# Messages name the script as the user called it: plot.sh in the source
# tree, tnt-bench-plot once installed.
prog=$(basename "$0")

usage() {
    cat <<EOF
usage: $prog -o OUT.png [options] [-l LABEL] FILE [[-l LABEL] FILE ...]

Each FILE becomes one curve (a CSV with a label column or a peers' log:
one curve per label, or per algorithm and rank count).
  -o FILE        the PNG to write (required)
  -l LABEL       the label of the next FILE's curve (default: its name,
                 with the collective, dtype and ranks of a tnt-bench JSON)
  -m out|in      tnt-bench JSON: plot the out-of-place (default) or the
                 in-place columns; a file without that form uses the other
  -f TEXT        keep only curves whose label contains TEXT (repeatable:
                 a curve is kept if it matches any)
  -t TITLE       the chart's title (default "allreduce")
  -h             this text
EOF
}

die() { echo "$prog: $*" >&2; exit 1; }
bad_usage() { echo "$prog: $*" >&2; echo "(try '$prog -h')" >&2; exit 2; }

out="" mode="out" title="allreduce" label=""
filters=() files=() labels=()
while [ $# -gt 0 ]; do
    case "$1" in
    -o|-l|-m|-f|-t)
        [ $# -ge 2 ] || bad_usage "option $1 needs a value"
        case "$1" in
        -o) out=$2 ;;
        -l) label=$2 ;;
        -m) mode=$2 ;;
        -f) filters+=("$2") ;;
        -t) title=$2 ;;
        esac
        shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) bad_usage "unknown option '$1'" ;;
    *) files+=("$1"); labels+=("$label"); label=""; shift ;;
    esac
done
[ -n "$out" ] || bad_usage "-o OUT.png is required"
[ ${#files[@]} -gt 0 ] || bad_usage "no result files given"
[ -z "$label" ] || bad_usage "-l '$label' is not followed by a file"
case "$mode" in out|in) ;; *) bad_usage "-m '$mode': expected out or in" ;; esac
command -v gnuplot >/dev/null ||
    die "gnuplot not found (Debian: apt-get install gnuplot-nox)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Every input becomes lines "LABEL<TAB>bytes<TAB>time_us<TAB>busbw" in
# $tmp/points; sizes of 0 bytes are dropped (the x axis is logarithmic).
for i in "${!files[@]}"; do
    f=${files[$i]} l=${labels[$i]}
    [ -r "$f" ] || die "cannot read '$f'"
    name=$(basename "$f")
    if grep -q '"rows": \[' "$f"; then
        awk -v label="$l" -v name="$name" -v mode="$mode" '
        # One JSON object per row line, as bench_run.c writes them.
        function field(s, key,   m) {
            if (match(s, "\"" key "\": [-0-9.eE+]+")) {
                m = substr(s, RSTART, RLENGTH)
                sub(/^[^:]*: /, "", m)
                return m
            }
            return ""
        }
        function form(s, key,   p) {
            p = index(s, "\"" key "\": {")
            if (p == 0) return ""
            s = substr(s, p + length(key) + 4)
            return substr(s, 1, index(s, "}"))
        }
        /"collective":/ { split($0, q, "\""); coll = q[4] }
        /"dtype":/ { split($0, q, "\""); dt = q[4] }
        /"nranks":/ { nr = field($0, "nranks") }
        /"bytes":/ {
            n++; bytes[n] = field($0, "bytes")
            o = form($0, "out_of_place"); p = form($0, "in_place")
            if (o != "") { ot[n] = field(o, "time_us"); ob[n] = field(o, "busbw_gbps"); no++ }
            if (p != "") { it[n] = field(p, "time_us"); ib[n] = field(p, "busbw_gbps"); ni++ }
        }
        END {
            use_in = (mode == "in" && ni > 0) || (mode == "out" && no == 0)
            if (label == "")
                label = sprintf("%s (%s %s, p=%s%s)", name, coll, dt, nr,
                                use_in ? ", in place" : "")
            for (k = 1; k <= n; k++) {
                t = use_in ? it[k] : ot[k]; b = use_in ? ib[k] : ob[k]
                if (bytes[k] > 0 && t != "")
                    printf "%s\t%s\t%s\t%s\n", label, bytes[k], t, b
            }
        }' "$f" >> "$tmp/points"
    elif grep -Eq '^(gloo|mpi) (algo|label)=' "$f"; then
        awk -v prefix="$l" '
        /^(gloo|mpi) (algo|label)=/ {
            split($2, a, "="); lab = $1 ":" a[2] " " $3
            if (prefix != "") lab = prefix " " lab
            for (k = 4; k <= NF; k++) {
                split($k, kv, "=")
                v[kv[1]] = kv[2]
            }
            if (v["bytes"] > 0)
                printf "%s\t%s\t%s\t%s\n", lab, v["bytes"], v["time_us"], v["busbw_GBps"]
        }' "$f" >> "$tmp/points"
    else
        # CSV: size_bytes,time_us,busbw_gbps[,label]; a header line or any
        # line whose first field is no number is skipped.
        awk -F, -v label="${l:-$name}" '
        $1 ~ /^[0-9]+$/ && NF >= 3 {
            lab = (NF >= 4 && $4 != "") ? $4 : label
            gsub(/^[ \t]+|[ \t\r]+$/, "", lab)
            if ($1 > 0) printf "%s\t%s\t%s\t%s\n", lab, $1, $2 + 0, $3 + 0
        }' "$f" >> "$tmp/points"
    fi
done

[ -s "$tmp/points" ] ||
    die "no data points in ${files[*]} (expected tnt-bench --json output," \
        "CSV size_bytes,time_us,busbw_gbps[,label] or a peers' bench log)"

# One data file per label, in order of first appearance, sorted by size;
# the filters apply to labels.
filter_re=""
for t in "${filters[@]+"${filters[@]}"}"; do
    filter_re+="${filter_re:+|}$(printf '%s' "$t" | sed 's/[][\.*^$(){}+?|/]/\\&/g')"
done
awk -F'\t' -v dir="$tmp" -v re="$filter_re" '
    re != "" && $1 !~ re { next }
    !($1 in id) { id[$1] = ++n; print $1 > (dir "/labels") }
    { print $2, $3, $4 > (dir "/c" id[$1] ".unsorted") }
' "$tmp/points"
[ -s "$tmp/labels" ] || die "no curve label matches ${filters[*]}"
ncurves=$(wc -l < "$tmp/labels")
for k in $(seq 1 "$ncurves"); do
    sort -n -k1,1 "$tmp/c$k.unsorted" > "$tmp/c$k.dat"
done

# x ticks at the powers of 4 inside the data, labelled in B, KiB, MiB,
# GiB (gnuplot's own %b%B would write "kiB" and "32  B").
xtics=$(cat "$tmp"/c*.dat | awk '{print $1}' | sort -n | awk '
    NR == 1 { lo = $1 } { hi = $1 }
    END {
        split("B KiB MiB GiB TiB", unit, " ")
        sep = ""
        for (v = 1; v <= hi * 1.01; v *= 4) {
            if (v < lo * 0.99) continue
            u = 1; x = v
            while (x >= 1024) { x /= 1024; u++ }
            printf "%s\"%d%s\" %.0f", sep, x, unit[u], v
            sep = ", "
        }
        printf "\n%.6g %.6g\n", lo / 1.25, hi * 1.25
    }')
xrange=$(printf '%s\n' "$xtics" | sed -n 2p)
xtics=$(printf '%s\n' "$xtics" | sed -n 1p)

# gnuplot strings in double quotes: escape backslashes and quotes.
gp_quote() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
plots() { # $1: the column to plot
    local k=0 sep="plot "
    while IFS= read -r lab; do
        k=$((k + 1))
        printf '%s%s using 1:%s with linespoints pt 7 ps 0.8 title %s' \
            "$sep" "$(gp_quote "$tmp/c$k.dat")" "$1" "$(gp_quote "$lab")"
        sep=", \\"$'\n'"     "
    done < "$tmp/labels"
    echo
}
{
    echo "set terminal pngcairo size 1500,620 noenhanced font ',10'"
    echo "set output $(gp_quote "$out")"
    # Eight dark colours that stay apart on white (gnuplot's default set
    # has a pale yellow), then they repeat.
    k=0
    for c in '#1f4e9c' '#d1420f' '#2a8a2a' '#8a2be2' '#111111' '#c71585' \
             '#008b8b' '#8b6508'; do
        k=$((k + 1)); echo "set linetype $k lc rgb '$c' lw 1.5"
    done
    echo "set linetype cycle 8"
    echo "set multiplot layout 1,2 title $(gp_quote "$title")"
    echo "set logscale x 2"
    echo "set xrange [${xrange% *}:${xrange#* }]"
    [ -n "$xtics" ] && echo "set xtics ($xtics)"
    echo "set xlabel 'message size'"
    echo "set grid"
    echo "set key top left"
    echo "set title 'bus bandwidth (higher is better)'"
    echo "set ylabel 'busbw (GB/s)'"
    echo "set yrange [0:*]"
    plots 3
    echo "set title 'time per operation (lower is better)'"
    echo "set ylabel 'time (us)'"
    echo "set logscale y 10"
    echo "set yrange [*:*]"
    echo "set format y '%g'"
    plots 2
    echo "unset multiplot"
} > "$tmp/plot.gp"
gnuplot "$tmp/plot.gp" || die "gnuplot failed (see its message above)"
[ -s "$out" ] || die "gnuplot wrote nothing to $out"
echo "$prog: wrote $out ($ncurves curves)"
