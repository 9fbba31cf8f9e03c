#!/usr/bin/env bash
# Checks the crate's layering from its `crate::` / `super::` / `self::` paths:
#
# 1. folders only import folders of a lower layer (no upward or sideways import):
#      ir < identical < similar < {validate, separate} < module < cli
#    (validate and separate share a layer and do not import each other);
# 2. no import cycle between files (a folder's mod.rs counts as a file: a child
#    that imports its own mod.rs while mod.rs re-exports the child is a cycle).
#
# A path (and a relative `use child::...`) is resolved to the longest prefix that
# is a file (`a/b.rs`) or a folder (`a/b/mod.rs`) under src/. Comment lines and unit
# tests (from `#[cfg(test)]` at the start of a line to the end of the file) are
# skipped; src/lib.rs (the crate root,
# which only declares and re-exports) and src/bin/ (another crate) are not checked.
# Prints every edge with --verbose. Exit status 1 on a violation.
set -euo pipefail
cd "$(dirname "$0")/../src"

verbose=0
[[ ${1:-} == --verbose ]] && verbose=1

find . -name '*.rs' -not -path './bin/*' -not -path './lib.rs' | sed 's|^\./||' | sort |
  while IFS= read -r file; do
    # One record per reference: FILE<TAB>PATH (`crate::a::b`, `super::x`, ...).
    # A relative `use child::...` (a folder's mod.rs naming its children) counts as
    # `self::child::...`; `use some_crate::...` resolves to the file itself and is
    # dropped.
    sed -e '/^#\[cfg(test)\]/,$d' -e 's|^[[:space:]]*//.*$||' \
      -e 's/^\([[:space:]]*\(pub\(([a-z]*)\)\{0,1\} \)\{0,1\}use \)\([a-z_][a-z0-9_]*::\)/\1self::\4/' \
      -e 's/self::\(crate\|super\|self\)::/\1::/' "$file" |
      grep -oE '\b(crate|super|self)(::[A-Za-z_][A-Za-z0-9_]*)+' |
      sed "s|^|$file	|" || true
    # Files with no reference still take part.
    printf '%s\t\n' "$file"
  done |
  awk -F'\t' -v verbose="$verbose" '
    function exists(path) { return (path in known) }
    # The module path (a::b) of a file (a/b.rs or a/b/mod.rs).
    function module_of(file,    m) {
      m = file
      sub(/\/mod\.rs$/, "", m)
      sub(/\.rs$/, "", m)
      gsub(/\//, "::", m)
      return m
    }
    function parent(m) {
      if (m !~ /::/) return ""
      sub(/::[^:]*$/, "", m)
      return m
    }
    # The file a module path names: its longest prefix that is a file or folder.
    function resolve(m,    f) {
      while (m != "") {
        f = m
        gsub(/::/, "/", f)
        if (exists(f ".rs")) return f ".rs"
        if (exists(f "/mod.rs")) return f "/mod.rs"
        m = parent(m)
      }
      return ""
    }
    function folder(file) {
      if (file !~ /\//) return "(root)"
      sub(/\/.*/, "", file)
      return file
    }
    function visit(f,    i, n, parts, t) {
      state[f] = 1
      stack[++depth] = f
      n = split(edges[f], parts, " ")
      for (i = 1; i <= n; i++) {
        t = parts[i]
        if (t == "") continue
        if (state[t] == 1) {
          cycle = ""
          for (j = depth; j >= 1; j--) {
            cycle = stack[j] (cycle == "" ? "" : " -> ") cycle
            if (stack[j] == t) break
          }
          print "cycle: " cycle " -> " t
          bad = 1
        } else if (state[t] == 0) {
          visit(t)
        }
      }
      depth--
      state[f] = 2
    }
    BEGIN {
      rank["ir"] = 0; rank["identical"] = 1; rank["similar"] = 2
      rank["validate"] = 3; rank["separate"] = 3; rank["module"] = 4; rank["cli"] = 5
    }
    { known[$1] = 1; file[NR] = $1; ref[NR] = $2 }
    END {
      for (r = 1; r <= NR; r++) {
        f = file[r]; p = ref[r]
        state[f] = 0
        if (p == "") continue
        m = module_of(f)
        if (p ~ /^crate::/) { sub(/^crate::/, "", p) }
        else if (p ~ /^super::/) {
          # The parent of a/b.rs (module a::b) and of a/mod.rs (module a) alike.
          base = parent(m)
          sub(/^super::/, "", p)
          p = (base == "" ? p : base "::" p)
        } else if (p ~ /^self::/) {
          sub(/^self::/, "", p)
          p = m "::" p
        }
        t = resolve(p)
        if (t == "" || t == f) continue
        key = f " " t
        if (key in seen) continue
        seen[key] = 1
        edges[f] = edges[f] " " t
        if (verbose) print "edge: " f " -> " t
        a = folder(f); b = folder(t)
        if (a != b) {
          if (!(a in rank) || !(b in rank)) {
            print "unknown folder: " f " -> " t " (add it to the layer table)"
            bad = 1
          } else if (rank[b] >= rank[a]) {
            print "layer violation: " f " (" a ") imports " t " (" b ")"
            bad = 1
          }
        }
      }
      for (f in state) if (state[f] == 0) visit(f)
      files = 0; for (f in state) files++
      n = 0; for (k in seen) n++
      if (bad) { print "layer check FAILED"; exit 1 }
      print "layers ok: " files " files, " n " imports between files, no cycle, no upward import"
    }
  '
