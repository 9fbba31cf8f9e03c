#!/usr/bin/env bash
# Records what a `clif-merge` binary prints for every filetest and every corpus
# program, so that two builds can be compared byte for byte (a restructuring must
# not change behaviour):
#
#   benches/identical_outputs.sh record BIN OUT_DIR   # run BIN, write OUT_DIR/*
#   benches/identical_outputs.sh compare DIR_A DIR_B  # cmp every file; exit 1 on a difference
#
# Per input, four runs: `clif-merge ARGS INPUT`, `clif-merge --report json ARGS INPUT`,
# and both again with `--similar` (not added twice where ARGS has it already). ARGS
# are the extra arguments of the filetest's `; clif-merge:` line (none for the
# corpus). Filetests get a fifth run, `--report json --similar --validate`, so that
# the translation validator's report is compared too. Each run leaves three files:
# stdout, stderr and the exit status.
# Corpus programs (../shared/corpus, unpacked into OUT_DIR/../corpus-src once) are
# run on each program's directory; then the separate-compilation subcommands run over
# them (each program a module: summarize, plan together, apply, dump), and the
# summaries, decisions, plan report, applied modules and dumps are kept too.
set -euo pipefail
cd "$(dirname "$0")/.."

record() {
  local bin=$1 out=$2
  mkdir -p "$out"
  local corpus_src
  corpus_src="$(dirname "$out")/corpus-src"
  if [[ -x ../shared/corpus/unpack && ! -d "$corpus_src/brotli" ]]; then
    mkdir -p "$corpus_src"
    ../shared/corpus/unpack "$corpus_src" >/dev/null
  fi
  local inputs=()
  while IFS= read -r f; do inputs+=("$f"); done < <(find filetests -name '*.clif' | sort)
  if [[ -d "$corpus_src" ]]; then
    for p in "$corpus_src"/*/; do inputs+=("${p%/}"); done
  fi
  local n=0
  for input in "${inputs[@]}"; do
    local args=() key
    if [[ -f "$input" ]]; then
      # shellcheck disable=SC2207
      args=($(sed -n 's/^[[:space:]]*; clif-merge://p' "$input"))
      key=$(echo "$input" | tr '/' '_')
    else
      key="corpus_$(basename "$input")"
    fi
    local similar=(--similar)
    for a in "${args[@]+"${args[@]}"}"; do
      [[ $a == --similar ]] && similar=()
    done
    local variant extra variants=(clif json clif-similar json-similar)
    [[ -f "$input" ]] && variants+=(json-similar-validate)
    for variant in "${variants[@]}"; do
      extra=()
      [[ $variant == json* ]] && extra+=(--report json)
      [[ $variant == *-similar* ]] && extra+=("${similar[@]+"${similar[@]}"}")
      [[ $variant == *-validate ]] && extra+=(--validate)
      local base="$out/$key.$variant"
      set +e
      "$bin" "${extra[@]+"${extra[@]}"}" "${args[@]+"${args[@]}"}" "$input" \
        >"$base.stdout" 2>"$base.stderr"
      echo $? >"$base.status"
      set -e
      n=$((n + 1))
    done
  done
  # Separate compilation over the corpus: every program a module, summarized,
  # planned together, each one's decisions applied, every file dumped.
  if [[ -d "$corpus_src" ]]; then
    local work summaries=() program
    work=$(mktemp -d)
    for p in "$corpus_src"/*/; do
      program=$(basename "$p")
      "$bin" summarize "${p%/}" -o "$work/$program.sum" 2>/dev/null
      summaries+=("$work/$program.sum")
      n=$((n + 1))
    done
    "$bin" plan "${summaries[@]}" --out-dir "$work/dec" --report json \
      >"$out/separate.plan.json" 2>/dev/null
    n=$((n + 1))
    for p in "$corpus_src"/*/; do
      program=$(basename "$p")
      "$bin" apply --decisions "$work/dec/$program.dec" "${p%/}" \
        >"$out/separate.$program.apply" 2>/dev/null
      "$bin" dump "$work/$program.sum" >"$out/separate.$program.sum.dump"
      "$bin" dump "$work/dec/$program.dec" >"$out/separate.$program.dec.dump"
      cp "$work/$program.sum" "$out/separate.$program.sum"
      cp "$work/dec/$program.dec" "$out/separate.$program.dec"
      n=$((n + 3))
    done
    rm -rf "$work"
  fi
  echo "recorded $n runs of $bin over ${#inputs[@]} inputs into $out"
}

compare() {
  local a=$1 b=$2 files=0 differ=0
  for fa in "$a"/*; do
    local name fb
    name=$(basename "$fa")
    fb="$b/$name"
    files=$((files + 1))
    if [[ ! -f $fb ]] || ! cmp -s "$fa" "$fb"; then
      echo "differs: $name"
      differ=$((differ + 1))
    fi
  done
  local nb
  nb=$(find "$b" -maxdepth 1 -type f | wc -l)
  if [[ $nb -ne $files ]]; then
    echo "file counts differ: $files in $a, $nb in $b"
    differ=$((differ + 1))
  fi
  echo "compared $files files: $differ differ"
  [[ $differ -eq 0 ]]
}

case ${1:-} in
  record) record "$2" "$3" ;;
  compare) compare "$2" "$3" ;;
  *)
    echo "usage: $0 record BIN OUT_DIR | compare DIR_A DIR_B" >&2
    exit 2
    ;;
esac
