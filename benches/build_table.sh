#!/usr/bin/env bash
# The build-time table of docs/module.md and README.md: `merge_bench module
# --markdown` (plain ObjectModule, MergingModule AtDefine with and without
# compile-once, AtFinish, and three codegen units on threads, plain and with
# cross-unit merging) on the generated 10,000-function program and on every
# program of ../shared/corpus, as one markdown table (median time of --repeat
# interleaved runs; heap and object bytes are exact).
#
# Usage: benches/build_table.sh [--repeat 3] [--no-corpus]
# The table is printed and kept in target/build-table/table.md, the bench's full
# output in target/build-table/log.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

REPEAT=3
CORPUS=1
while [ $# -gt 0 ]; do
    case "$1" in
        --repeat) REPEAT="$2"; shift 2 ;;
        --no-corpus) CORPUS=0; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

OUT=target/build-table
mkdir -p "$OUT"
BENCH=$(cargo bench --bench merge_bench --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*merge_bench[^"]*\)".*/\1/p' | tail -1)
[ -x "$BENCH" ] || { echo "no merge_bench binary" >&2; exit 1; }

"$BENCH" gen --functions 10000 --out "$OUT/gen10k" >/dev/null
inputs=("gen 10k=$OUT/gen10k/module.clif")
if [ "$CORPUS" = 1 ] && [ -x ../shared/corpus/unpack ]; then
    ../shared/corpus/unpack "$OUT/corpus" >/dev/null
    for program in mozjpeg brotli sqljs resvg; do
        [ -d "$OUT/corpus/$program" ] && inputs+=("$program=$OUT/corpus/$program")
    done
fi

: >"$OUT/log.txt"
{
    echo "| input | build | define → objects | peak heap | object bytes | merged |"
    echo "|---|---|---:|---:|---:|---:|"
} >"$OUT/table.md"
for entry in "${inputs[@]}"; do
    label=${entry%%=*}
    path=${entry#*=}
    "$BENCH" module --repeat "$REPEAT" --markdown --label "$label" "$path" | tee -a "$OUT/log.txt" |
        grep '^| ' | grep -v '^| input' >>"$OUT/table.md"
done
cat "$OUT/table.md"
