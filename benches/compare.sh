#!/usr/bin/env bash
# Side-by-side benchmark, one machine, one run:
#   1. clif-merge's pass (parsing excluded) on a generated CLIF module, 1 thread and all cores;
#   2. LLVM's `opt -passes=mergefunc` on the same module as LLVM IR (pass time from
#      -time-passes), with the newest LLVM Debian offers (llvm-19), else `opt`;
#   3. lld's identical code folding (`ld.lld --icf=all --threads=1`, ICF time from
#      --time-trace) on the same module compiled to machine code by llc (-O2, one
#      section per function): a merging pass of another kind, on code after a
#      whole compile, which folds by comparing section bytes and relocations;
#   4. Cranelift's own compile time for the same CLIF functions (host ISA,
#      opt_level=speed, verifier off as rustc_codegen_cranelift and wasmtime ship it,
#      no merging), on 1 thread and on all cores;
#   5. on the generated modules, the machine instructions the pass executes
#      (callgrind, when valgrind is installed): work that no cache, memory or
#      scheduler changes, to set beside time(10N)/time(N);
# for N = 1k, 10k, 100k generated functions, then for every program of
# ../shared/corpus (pass vs compile time). Prints one table, the ratios
# clif-merge/LLVM and clif-merge/compile, and time(10N)/time(N).
#
# Two mixes of generated functions are measured: "dup" (20% exact duplicates, 20%
# near duplicates) and "near" (5% exact, 50% near duplicates: equal hashes, late
# differences, the comparator's worst case).
#
# Usage: benches/compare.sh [--sizes "1000 10000 100000"] [--mixes "0.2/0.2 0.05/0.5"]
#                           [--repeat 5] [--no-corpus] [--no-compile] [--no-count]
# Results (JSON lines) are kept in target/bench-compare/results.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES="1000 10000 100000"
MIXES="0.2/0.2 0.05/0.5"
REPEAT=5
CORPUS=1
COMPILE=1
COUNT=1
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) SIZES="$2"; shift 2 ;;
    --mixes) MIXES="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --no-corpus) CORPUS=0; shift ;;
    --no-compile) COMPILE=0; shift ;;
    --no-count) COUNT=0; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
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
# --- lld and llc of the same LLVM, installed the same way.
if ! command -v ld.lld-19 >/dev/null 2>&1; then
  echo "installing lld-19 (apt-get) ..." >&2
  { apt-get install -y lld-19 || sudo apt-get install -y lld-19 ||
    { apt-get update && apt-get install -y lld-19; }; } >/dev/null 2>&1 ||
    echo "lld-19 could not be installed: the lld column will be empty" >&2
fi
LLD=$(command -v ld.lld-19 || command -v ld.lld || true)
LLC=$(command -v llc-19 || command -v llc || true)

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

# lld's ICF time in ms (best of $REPEAT runs) and the sections it folded, as
# JSON fields, for the LLVM IR module $1 compiled to an object $2.
lld_icf() {
  local ll="$1" obj="$2" best="" folded=0
  "$LLC" -O2 -filetype=obj -function-sections "$ll" -o "$obj"
  for _ in $(seq "$REPEAT"); do
    folded=$("$LLD" --icf=all --threads=1 --entry=f0 --print-icf-sections \
      --time-trace="$obj.trace.json" --time-trace-granularity=0 -o "$obj.out" "$obj" 2>/dev/null |
      grep -c 'removing identical section' || true)
    local t
    t=$(python3 -c 'import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
print(sum(e["dur"] for e in events if e.get("ph") == "X" and e["name"] == "ICF") / 1000)' \
      "$obj.trace.json")
    if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
  done
  rm -f "$obj" "$obj.out" "$obj.trace.json"
  echo "\"lld_icf_ms\":${best:-null},\"lld_folded\":$folded"
}

# Machine instructions of the pass on the module $1, one thread: callgrind
# counting inside merge_functions_in_place only (parsing excluded), over the
# two passes `merge_bench pass --repeat 1` makes (the timed one and the one
# counting the heap), so the count is about twice one pass's. `null` without
# valgrind.
pass_instructions() {
  if [ "$COUNT" = 0 ] || ! command -v valgrind >/dev/null; then
    echo null
    return
  fi
  local out="$OUT/callgrind.out"
  valgrind --tool=callgrind --toggle-collect='*merge_functions_in_place*' \
    --callgrind-out-file="$out" "$BENCH" pass --repeat 1 --threads 1 "$1" \
    >/dev/null 2>"$out.log"
  local count
  count=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out.log" | tail -1)
  rm -f "$out" "$out.log"
  echo "${count:-null}"
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
  if [ -n "$ll" ]; then
    echo "{\"label\":\"$label\",\"pass_instructions\":$(pass_instructions "$clif")}" >> "$RESULTS"
  fi
  if [ -n "$ll" ] && [ -n "$OPT" ]; then
    echo "{\"label\":\"$label\",\"llvm_mergefunc_ms\":$(llvm_mergefunc_ms "$ll")}" >> "$RESULTS"
  fi
  if [ -n "$ll" ] && [ -n "$LLD" ] && [ -n "$LLC" ]; then
    echo "{\"label\":\"$label\",$(lld_icf "$ll" "${ll%.ll}.o")}" >> "$RESULTS"
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
print(f"| input | functions | instructions | clif-merge 1 thread ms (ns/instruction) | {cores} threads ms | hash / encode / tree / refine / apply ms (1 thread) | comparisons/function | LLVM mergefunc ms | clif-merge / LLVM (1 / {cores} threads) | lld ICF ms, 1 thread (folded) | clif-merge / lld ICF (1 thread) | Cranelift compile ms (1 / {cores} threads) | clif-merge / compile (1 / {cores} threads) | similar / compile (1 thread) | parsed functions MB | pass peak MB (/ parsed) | merged |")
print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
best = {}
for label in order:
    row = rows[label]
    one, many = row.get(1), row.get(cores) or row.get(1)
    if one is None:
        continue
    best[label] = (one["functions"], one["pass_ms"], row.get("llvm_mergefunc_ms"), row.get("lld_icf_ms"), row.get("pass_instructions"))
    llvm = row.get("llvm_mergefunc_ms")
    lld, lld_folded = row.get("lld_icf_ms"), row.get("lld_folded")
    comp, comp_n = row.get("compile_ms"), row.get("compile_all_cores_ms")
    similar, similar_base = row.get("similar_ms"), row.get("similar_compile_ms")
    t1, tn = one["pass_ms"], many["pass_ms"]
    print("| {} | {} | {} | {} ({}) | {} | {} / {} / {} / {} / {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} ({}) | {} |".format(
        label, one["functions"], one["instructions"], f(t1, ".2f"),
        f(1e6 * t1 / max(one["instructions"], 1), ".1f"), f(tn, ".2f"),
        f(one["hash_ms"], ".2f"), f(one["encode_ms"], ".2f"), f(one["tree_ms"], ".2f"), f(one["refine_ms"], ".2f"), f(one["apply_ms"], ".2f"),
        f(one["comparisons_per_function"], ".2f"), f(llvm, ".2f"),
        "-" if not llvm else format(t1 / llvm, ".2f") + " / " + format(tn / llvm, ".2f"),
        "-" if lld is None else f"{lld:.2f} ({lld_folded})",
        "-" if not lld else format(t1 / lld, ".2f"),
        f(comp), f(comp_n),
        "-" if not comp else format(100 * t1 / comp, ".2f") + "% / " + ("-" if not comp_n else format(100 * tn / comp_n, ".2f") + "%"),
        "-" if not (similar_base and similar) else format(100 * similar / similar_base, ".1f") + "%",
        f(one["parsed_bytes"] / 1e6), f(one["pass_peak_bytes"] / 1e6),
        format(one["pass_peak_bytes"] / max(one["parsed_bytes"], 1), ".2f"), one["merged"]))
mixes = {}
for label, times in best.items():
    if label.startswith("N="):
        mixes.setdefault(label.split(" ", 1)[1], []).append(times)
print()
for mix, runs in mixes.items():
    runs.sort()
    for (n1, *before), (n2, *after) in zip(runs, runs[1:]):
        ratios = ", ".join(
            f"{name} {t2 / t1:.2f}"
            for name, t1, t2 in zip(["clif-merge", "LLVM mergefunc", "lld ICF"], before, after)
            if t1 and t2)
        work = ""
        if before[3] and after[3]:
            work = f"; clif-merge's machine instructions (callgrind) {after[3] / before[3]:.2f}"
        print(f"{mix}: time(N={n2}) / time(N={n1}) on 1 thread (N ratio {n2 / n1:.0f}): {ratios}{work}")
EOF
