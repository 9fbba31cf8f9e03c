#!/usr/bin/env bash
# The cost of class refinement on the shapes that make a round-by-round
# fixpoint quadratic (issue 49):
#
#   benches/refine_bench.sh CLIF_MERGE MERGE_BENCH [--callgrind] [N...]
#
# Shapes, at N = 2500 5000 10000 20000 unless given:
#   chain: %c0 -> %c1 -> ... -> %c{N-1} (x + 5) and the same with %d (x + 6): every
#          function but the last two looks alike, and the difference climbs the
#          chains one caller per round;
#   fan:   N callers %f{i}, each calling its own leaf %l{i}, the leaves alike.
# For each: `CLIF_MERGE --stats` (comparisons, refinement rounds, refine time), then
# MERGE_BENCH (`cargo bench --bench merge_bench --no-run` prints its path)
# `refine` defining the functions through a plain ObjectModule, through
# MergingModule compiling at define (default options: compile-once reuses the
# compile of equal IR) and through it compiling every function (compile-once off),
# each in its own process (fastest of 3), and the ratios of their times to plain. With --callgrind each of those two runs once more under
# `valgrind --tool=callgrind` and the ratio of instruction counts is printed too.
set -euo pipefail
bin=$1 bench=$2
shift 2
callgrind=false
if [[ ${1:-} == --callgrind ]]; then
  callgrind=true
  shift
fi
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(2500 5000 10000 20000)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

gen() {
  local shape=$1 n=$2
  awk -v shape="$shape" -v n="$n" '
    function caller(name, callee) {
      printf "function %%%s(i32) -> i32 {\n    fn0 = %%%s(i32) -> i32\nblock0(v0: i32):\n    v1 = call fn0(v0)\n    return v1\n}\n", name, callee
    }
    function leaf(name, k) {
      printf "function %%%s(i32) -> i32 {\nblock0(v0: i32):\n    v1 = iconst.i32 %d\n    v2 = iadd v0, v1\n    return v2\n}\n", name, k
    }
    BEGIN {
      if (shape == "chain") {
        for (c = 0; c < 2; c++) {
          p = c == 0 ? "c" : "d"
          for (i = 0; i < n - 1; i++) caller(p i, p (i + 1))
          leaf(p (n - 1), 5 + c)
        }
      } else {
        for (i = 0; i < n; i++) caller("f" i, "l" i)
        for (i = 0; i < n; i++) leaf("l" i, 5)
      }
    }'
}

instructions() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

for shape in chain fan; do
  for n in "${sizes[@]}"; do
    file="$work/$shape$n.clif"
    gen "$shape" "$n" >"$file"
    stats=$("$bin" --stats "$file" 2>&1 >/dev/null)
    work_line=$(grep 'work:' <<<"$stats" | sed 's/^ *work: //')
    refine=$(sed -n 's/.*refine \([0-9.]*\).*/\1/p' <<<"$stats")
    plain=$("$bench" refine --configuration plain --repeat 3 "$file" | sed -n 's/.*, \([0-9.]*\) ms,.*/\1/p')
    merging=$("$bench" refine --configuration at-define --repeat 3 "$file" | sed -n 's/.*, \([0-9.]*\) ms,.*/\1/p')
    fresh=$("$bench" refine --configuration at-define-fresh --repeat 3 "$file" | sed -n 's/.*, \([0-9.]*\) ms,.*/\1/p')
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
    line="$shape N=$n: CLI $work_line, refine $refine ms; plain $plain ms, MergingModule $merging ms ($(ratio "$merging" "$plain")x), compile-once off $fresh ms ($(ratio "$fresh" "$plain")x)"
    if $callgrind; then
      ip=$(instructions "$bench" refine --configuration plain --repeat 1 "$file")
      im=$(instructions "$bench" refine --configuration at-define --repeat 1 "$file")
      ifr=$(instructions "$bench" refine --configuration at-define-fresh --repeat 1 "$file")
      line="$line; instructions plain $ip, MergingModule $im ($(ratio "$im" "$ip")x), compile-once off $ifr ($(ratio "$ifr" "$ip")x)"
    fi
    echo "$line"
  done
done
