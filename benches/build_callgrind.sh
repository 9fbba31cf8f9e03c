#!/usr/bin/env bash
# The instruction counts beside the build-time table (docs/module.md): each
# configuration of `merge_bench module --only V` in a process of its own under
# callgrind, counting only the build (`--toggle-collect` on `run_variant`, from
# the first define to the emitted object; the parse of the input is left out),
# over a generated program of mostly pairs (3,000 functions, 21% exact
# duplicates: gen --functions 3000 --dup-rate 0.21 --near-rate 0 --seed 7), the
# generated 10,000-function program and every program of ../shared/corpus.
# Prints a markdown table, each count against the plain `ObjectModule`'s.
#
# Usage: benches/build_callgrind.sh [--no-corpus] [VARIANT...]
# (default variants: plain once no-duplicates every; see `module_wrapper::only`).
# The table is kept in target/build-callgrind/table.md. Slow: about 50 times the
# build's own time per configuration.
set -euo pipefail
cd "$(dirname "$0")/.."

CORPUS=1
VARIANTS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --no-corpus) CORPUS=0; shift ;;
        *) VARIANTS+=("$1"); shift ;;
    esac
done
[ ${#VARIANTS[@]} -gt 0 ] || VARIANTS=(plain once no-duplicates every)

OUT=target/build-callgrind
mkdir -p "$OUT"
BENCH=$(cargo bench --bench merge_bench --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*merge_bench[^"]*\)".*/\1/p' | tail -1)
[ -x "$BENCH" ] || { echo "no merge_bench binary" >&2; exit 1; }

"$BENCH" gen --functions 3000 --dup-rate 0.21 --near-rate 0 --seed 7 --out "$OUT/pairs3k" >/dev/null
"$BENCH" gen --functions 10000 --out "$OUT/gen10k" >/dev/null
inputs=("pairs 3k=$OUT/pairs3k/module.clif" "gen 10k=$OUT/gen10k/module.clif")
if [ "$CORPUS" = 1 ] && [ -x ../shared/corpus/unpack ]; then
    ../shared/corpus/unpack "$OUT/corpus" >/dev/null
    for program in mozjpeg brotli sqljs resvg; do
        [ -d "$OUT/corpus/$program" ] && inputs+=("$program=$OUT/corpus/$program")
    done
fi

{
    echo "| input | build | instructions | time under callgrind |"
    echo "|---|---|---:|---:|"
} >"$OUT/table.md"
for entry in "${inputs[@]}"; do
    label=${entry%%=*}
    path=${entry#*=}
    plain=
    for variant in "${VARIANTS[@]}"; do
        out="$OUT/${label// /_}.$variant.callgrind"
        valgrind --tool=callgrind --toggle-collect='*run_variant*' \
            --callgrind-out-file="$out" "$BENCH" module --only "$variant" \
            --label "$label" "$path" >"$out.log" 2>&1
        ir=$(sed -n 's/^summary: //p' "$out" | head -1)
        ms=$(sed -n 's/.*functions, \([0-9.]*\) ms.*/\1/p' "$out.log" | head -1)
        [ "$variant" = plain ] && plain=$ir
        ratio=
        [ -n "$plain" ] && [ "$variant" != plain ] &&
            ratio=$(awk -v a="$ir" -v b="$plain" 'BEGIN { printf " (%.3f×)", a / b }')
        printf '| %s | %s | %s%s | %s ms |\n' "$label" "$variant" \
            "$(printf "%'d" "$ir" 2>/dev/null || echo "$ir")" "$ratio" "$ms" >>"$OUT/table.md"
    done
done
cat "$OUT/table.md"
