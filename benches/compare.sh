#!/usr/bin/env bash
# Side-by-side benchmark, one machine, one run:
#   1. clif-merge's pass (parsing excluded) on a generated CLIF module, 1 thread and all cores;
#   2. LLVM's `opt -passes=mergefunc` on the same module as LLVM IR (pass time from
#      -time-passes), with the newest LLVM Debian offers (llvm-19), else `opt`;
#   3. Cranelift's own compile time for the same CLIF functions (host ISA,
#      opt_level=speed, verifier off as rustc_codegen_cranelift and wasmtime ship it,
#      no merging), on 1 thread and on all cores;
# for N = 1k, 10k, 100k generated functions, then for every program of
# ../shared/corpus (pass vs compile time). Prints one table, the ratios
# clif-merge/LLVM and clif-merge/compile, and time(10N)/time(N).
#
# Two mixes of generated functions are measured: "dup" (20% exact duplicates, 20%
# near duplicates) and "near" (5% exact, 50% near duplicates: equal hashes, late
# differences, the comparator's worst case).
#
# Usage: benches/compare.sh [--sizes "1000 10000 100000"] [--mixes "0.2/0.2 0.05/0.5"]
#                           [--repeat 5] [--no-corpus] [--no-compile]
# Results (JSON lines) are kept in target/bench-compare/results.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES="1000 10000 100000"
MIXES="0.2/0.2 0.05/0.5"
REPEAT=5
CORPUS=1
COMPILE=1
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) SIZES="$2"; shift 2 ;;
    --mixes) MIXES="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --no-corpus) CORPUS=0; shift ;;
    --no-compile) COMPILE=0; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

OUT=target/bench-compare
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: > "$RESULTS"

# --- LLVM: the newest Debian offers, else whatever `opt` is installed.
find_opt() {
  for candidate in opt-19 /usr/lib/llvm-19/bin/opt opt-18 opt-17 opt-16 opt-15 opt; do
    if command -v "$candidate" >/dev/null 2>&1; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}
if ! command -v opt-19 >/dev/null 2>&1 && [ ! -x /usr/lib/llvm-19/bin/opt ]; then
  echo "installing llvm-19 (apt-get) ..." >&2
  { apt-get install -y llvm-19 || sudo apt-get install -y llvm-19 ||
    { apt-get update && apt-get install -y llvm-19; }; } >/dev/null 2>&1 ||
    echo "llvm-19 could not be installed; falling back to the installed opt" >&2
fi
OPT=$(find_opt || true)
if [ -z "$OPT" ]; then
  echo "no LLVM opt found: the LLVM column will be empty" >&2
else
  echo "LLVM: $("$OPT" --version | grep -i 'llvm version' | head -1 | sed 's/^ *//')" >&2
fi

CORES=$(nproc)

# --- The benchmark binary (release), built once.
cargo bench --bench merge_bench --no-run >&2
BENCH=$(cargo bench --bench merge_bench --no-run --message-format=json 2>/dev/null |
  grep -o '"executable":"[^"]*merge_bench[^"]*"' | tail -1 | sed 's/"executable":"//; s/"$//')
[ -x "$BENCH" ] || { echo "merge_bench binary not found" >&2; exit 1; }

# MergeFunctionsPass wall time in ms, best of $REPEAT runs.
llvm_mergefunc_ms() {
  local ll="$1" best=""
  for _ in $(seq "$REPEAT"); do
    local t
    t=$("$OPT" -passes=mergefunc -time-passes -disable-output "$ll" 2>&1 |
      awk '/MergeFunctionsPass/ {
             # columns: user (pct) [system (pct)] user+system (pct) wall (pct) name
             for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) last = $i; print last * 1000; exit }')
    if [ -n "$t" ] && { [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; }; then best=$t; fi
  done
  echo "${best:-null}"
}

measure() {
  local label="$1" clif="$2" ll="$3"
  echo "== $label" >&2
  "$BENCH" pass --json --repeat "$REPEAT" --threads 1 --threads "$CORES" "$clif" |
    sed "s/^{/{\"label\":\"$label\",/" >> "$RESULTS"
  if [ "$COMPILE" = 1 ]; then
    "$BENCH" compile --json "$clif" | sed "s/^{/{\"label\":\"$label\",/" >> "$RESULTS"
  fi
  if [ -z "$ll" ]; then
    # A corpus program: what --similar adds, against compile, both on one thread.
    "$BENCH" similar --json --repeat 3 "$clif" | sed "s/^{/{\"label\":\"$label\",/" >> "$RESULTS"
  fi
  if [ -n "$ll" ] && [ -n "$OPT" ]; then
    echo "{\"label\":\"$label\",\"llvm_mergefunc_ms\":$(llvm_mergefunc_ms "$ll")}" >> "$RESULTS"
  fi
}

for mix in $MIXES; do
  dup=${mix%/*}
  near=${mix#*/}
  for n in $SIZES; do
    dir="$OUT/gen-$dup-$near-$n"
    "$BENCH" gen --functions "$n" --dup-rate "$dup" --near-rate "$near" --seed 1 --out "$dir" >&2
    measure "N=$n dup=$dup near=$near" "$dir/module.clif" "$dir/module.ll"
    rm -f "$dir/module.clif" "$dir/module.ll"
  done
done

if [ "$CORPUS" = 1 ] && [ -f ../shared/corpus/unpack ]; then
  sh ../shared/corpus/unpack "$OUT/corpus" >/dev/null
  for program in "$OUT"/corpus/*/; do
    measure "$(basename "$program")" "$program" ""
  done
fi

python3 - "$RESULTS" <<'EOF'
import json, sys
rows = {}
order = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    label = r["label"]
    if label not in rows:
        rows[label] = {}
        order.append(label)
    row = rows[label]
    if "threads" in r:
        row[r["threads"]] = r
    else:
        row.update(r)

def f(x, spec=".1f"):
    return "-" if x is None else format(x, spec)

cores = max((k for row in rows.values() for k in row if isinstance(k, int)), default=1)
print()
print(f"| input | functions | instructions | clif-merge 1 thread ms (ns/instruction) | {cores} threads ms | hash / encode / tree / refine / apply ms (1 thread) | comparisons/function | LLVM mergefunc ms | clif-merge / LLVM (1 / {cores} threads) | Cranelift compile ms (1 / {cores} threads) | clif-merge / compile (1 / {cores} threads) | similar / compile (1 thread) | parsed functions MB | pass peak MB (/ parsed) | merged |")
print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
best = {}
for label in order:
    row = rows[label]
    one, many = row.get(1), row.get(cores) or row.get(1)
    if one is None:
        continue
    best[label] = (one["functions"], one["pass_ms"])
    llvm = row.get("llvm_mergefunc_ms")
    comp, comp_n = row.get("compile_ms"), row.get("compile_all_cores_ms")
    similar, similar_base = row.get("similar_ms"), row.get("similar_compile_ms")
    t1, tn = one["pass_ms"], many["pass_ms"]
    print("| {} | {} | {} | {} ({}) | {} | {} / {} / {} / {} / {} | {} | {} | {} | {} / {} | {} | {} | {} | {} ({}) | {} |".format(
        label, one["functions"], one["instructions"], f(t1, ".2f"),
        f(1e6 * t1 / max(one["instructions"], 1), ".1f"), f(tn, ".2f"),
        f(one["hash_ms"], ".2f"), f(one["encode_ms"], ".2f"), f(one["tree_ms"], ".2f"), f(one["refine_ms"], ".2f"), f(one["apply_ms"], ".2f"),
        f(one["comparisons_per_function"], ".2f"), f(llvm, ".2f"),
        "-" if not llvm else format(t1 / llvm, ".2f") + " / " + format(tn / llvm, ".2f"),
        f(comp), f(comp_n),
        "-" if not comp else format(100 * t1 / comp, ".2f") + "% / " + ("-" if not comp_n else format(100 * tn / comp_n, ".2f") + "%"),
        "-" if not (similar_base and similar) else format(100 * similar / similar_base, ".1f") + "%",
        f(one["parsed_bytes"] / 1e6), f(one["pass_peak_bytes"] / 1e6),
        format(one["pass_peak_bytes"] / max(one["parsed_bytes"], 1), ".2f"), one["merged"]))
mixes = {}
for label, (n, t) in best.items():
    if label.startswith("N="):
        mixes.setdefault(label.split(" ", 1)[1], []).append((n, t))
print()
for mix, runs in mixes.items():
    runs.sort()
    for (n1, t1), (n2, t2) in zip(runs, runs[1:]):
        print(f"{mix}: time(N={n2}) / time(N={n1}) = {t2 / t1:.2f} on 1 thread (N ratio {n2 / n1:.0f})")
EOF
