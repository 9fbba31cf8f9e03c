#!/usr/bin/env bash
# The similar-merge table of README.md: per corpus program, the x86 code bytes
# `--similar` saves (every function compiled before and after, its merges
# validated: tests/passes/corpus.rs `corpus_similar_merges_shrink_code_and_validate`)
# and what it costs against a one-thread Cranelift compile of the same functions
# (`merge_bench similar`: thread CPU time, the fastest of --repeat rounds).
#
# Usage: benches/similar_table.sh [--repeat 5]
# The table is printed and kept in target/similar-table/table.md, the full
# outputs in target/similar-table/{savings,cost}.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

REPEAT=5
while [ $# -gt 0 ]; do
    case "$1" in
        --repeat) REPEAT="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[ -x ../shared/corpus/unpack ] || { echo "../shared/corpus not found" >&2; exit 1; }

OUT=target/similar-table
mkdir -p "$OUT"
BENCH=$(cargo bench --bench merge_bench --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*merge_bench[^"]*\)".*/\1/p' | tail -1)
[ -x "$BENCH" ] || { echo "no merge_bench binary" >&2; exit 1; }

# Savings: the corpus test prints one markdown row per program.
cargo test --release --test passes corpus_similar_merges_shrink_code_and_validate \
    -- --nocapture >"$OUT/savings.txt" 2>&1

# Cost: one row per program.
../shared/corpus/unpack "$OUT/corpus" >/dev/null
programs=()
for program in brotli mozjpeg resvg sqljs; do
    [ -d "$OUT/corpus/$program" ] && programs+=("$OUT/corpus/$program")
done
"$BENCH" similar --repeat "$REPEAT" "${programs[@]}" >"$OUT/cost.txt"

# Joined by program. Savings columns: 2 program, 8 code bytes before -> after,
# 9 saved, 10 validated / members, 11 mismatches; cost columns: 2 program, 4
# compile wall / CPU, 5 similar wall / CPU, 7 share of compile (CPU).
awk -F'|' '
    function trim(s) { gsub(/^ +| +$/, "", s); return s }
    function cpu(s) { s = trim(s); sub(/ ms$/, "", s); sub(/.* \/ /, "", s); return s }
    FNR == NR {
        if ($0 ~ /^\| [a-z]+ \| [0-9]+ -> /) {
            p = trim($2); bytes[p] = trim($8); saved[p] = trim($9)
            validated[p] = trim($10); mismatches[p] = trim($11); order[++n] = p
            split(bytes[p], b, / -> /); before += b[1]; after += b[2]
        }
        next
    }
    $0 ~ /^\| [a-z]+ \| [0-9]+ \| / {
        p = trim($2); compile[p] = cpu($4); similar[p] = cpu($5); share[p] = trim($7)
    }
    END {
        print "| program | x86 code bytes, before -> after | saved | entry points validated / members, mismatches | one-thread compile (CPU) | `--similar` (CPU) | share of the compile |"
        print "|---|---:|---:|---:|---:|---:|---:|"
        for (i = 1; i <= n; i++) {
            p = order[i]
            printf "| %s | %s | %s | %s, %s | %s ms | %s ms | %s |\n", p, bytes[p], saved[p], validated[p], mismatches[p], compile[p], similar[p], share[p]
        }
        if (before > 0) {
            printf "| all four | %d -> %d | %.2f%% | | | | |\n", before, after, 100 * (before - after) / before
        }
    }
' "$OUT/savings.txt" "$OUT/cost.txt" | tee "$OUT/table.md"
