//! Snapshots: a deterministic table a test computes, compared with the table written
//! in the test, so that any change to it shows as a diff.
//!
//! A snapshot is not a floor: it records exactly what the pass does today on a fixed
//! input. When a deliberate change moves a number, the failure prints the whole new
//! table, to be pasted over the old one (and the change explained in the commit).

#![allow(dead_code)]

/// Fails unless `actual` equals `expected`, line by line (surrounding blank lines and
/// each line's indentation are ignored, so the expected text can be indented in the
/// test source). The message shows the lines that differ (`-` expected, `+` actual)
/// and then the whole actual table.
#[track_caller]
pub fn assert_snapshot(what: &str, actual: &str, expected: &str) {
    let actual_lines = lines(actual);
    let expected_lines = lines(expected);
    if actual_lines == expected_lines {
        return;
    }
    panic!(
        "{what}: the snapshot changed (update it deliberately if the change is intended)\n\
         --- expected\n+++ actual\n{}\n--- the whole actual table:\n{}\n",
        diff(&expected_lines, &actual_lines),
        actual_lines.join("\n")
    );
}

fn lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let start = lines
        .iter()
        .position(|l| !l.is_empty())
        .unwrap_or(lines.len());
    let end = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(start, |e| e + 1);
    lines[start..end].to_vec()
}

/// A line diff by longest common subsequence: ` ` kept, `-` only in `a`, `+` only in
/// `b`.
fn diff(a: &[&str], b: &[&str]) -> String {
    let (n, m) = (a.len(), b.len());
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(format!("  {}", a[i]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push(format!("+ {}", b[j]));
            j += 1;
        } else {
            out.push(format!("- {}", a[i]));
            i += 1;
        }
    }
    out.join("\n")
}
