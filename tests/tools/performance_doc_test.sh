#!/usr/bin/env bash
# performance_doc.py --render_only rebuilds a generated block of a document
# from distbench JSON (fixtures made here, with known ratios), leaves the
# prose around it alone, and refuses a document without the block.
set -euo pipefail
script=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
def run(n, rows):
    return {"host": "fixture", "date": "2026-01-01T00:00:00Z", "results": rows}
def row(op, size, ratio, us=1.0, raw_us=2.0):
    return {"op": op, "size": size, "time_us": us, "wrong": 0,
            "raw": {"time_ratio": ratio, "time_us": raw_us}}
for n in (2, 3, 4):
    rows = [row("all_reduce", 8, 0.25 + n), row("all_reduce", 256 << 10, 0.5),
            row("broadcast", 8, 0.3), row("all_gather", 8 if n != 3 else 12, 0.4),
            row("barrier", 0, 0.9)]
    json.dump(run(n, rows), open("%s/gloo_n%d.json" % (d, n), "w"))
for n in (2, 4):
    json.dump(run(n, [row("all_reduce", 8, 0.75, 0.3, 0.4)]), open("%s/shm_mpi_n%d.json" % (d, n), "w"))
for n in (2, 3, 4):
    big = row("all_reduce", 4 << 20, 0.5)
    big["busbw_gbps"] = 3.0 + n
    big["raw"].update({"busbw_gbps": 1.5, "variant": "AllreduceRing"})
    # distbench --ceiling: N=2 and N=4 measured loopback TCP; N=3 is JSON of
    # a run without it. N=2's fraction (a median of per-round ratios) is not
    # the quotient of the medians (5.00 / 6.25 = 80%): the line prints it.
    if n == 2:
        big["ceiling"] = {"name": "loopback_tcp", "busbw_gbps": 6.25, "fraction": 0.79}
    if n == 4:
        big["ceiling"] = {"name": "loopback_tcp", "busbw_gbps": 5.5, "fraction": None}
    rows = [row("all_reduce", 1 << 20, 0.8), big, row("broadcast", 1 << 20, 1.25)]
    json.dump(run(n, rows), open("%s/gloo_large_n%d.json" % (d, n), "w"))
PY
cat > "$dir/doc.md" <<'EOF2'
# Before
<!-- generated: gloo_raw (tools/distbench/performance_doc.py) -->
stale
<!-- end generated: gloo_raw -->
Between.
<!-- generated: shm_mpi (tools/distbench/performance_doc.py) -->
<!-- end generated: shm_mpi -->
<!-- generated: gloo_raw_large (tools/distbench/performance_doc.py) -->
<!-- end generated: gloo_raw_large -->
After.
EOF2
python3 "$script" --render_only --json_dir "$dir" --doc "$dir/doc.md" >/dev/null
fail() { echo "FAIL: $1"; cat "$dir/doc.md"; exit 1; }
grep -q "^# Before$" "$dir/doc.md" && grep -q "^Between.$" "$dir/doc.md" && grep -q "^After.$" "$dir/doc.md" || fail "the prose changed"
grep -q "stale" "$dir/doc.md" && fail "the old block is still there"
grep -qF "| all_reduce | 3 | 3.25 | - | - | - | - | 0.50 |" "$dir/doc.md" || fail "all_reduce N=3 row"
grep -qF "| all_gather | 3 | 0.40 | - | - | - | - | - |" "$dir/doc.md" || fail "12 B of all_gather at N=3 is the 8 B column"
grep -qF "barrier: N=2 0.90, N=3 0.90, N=4 0.90." "$dir/doc.md" || fail "barrier line"
grep -qF "| 8 B | 0.30 | 0.40 | 0.75 | 0.30 | 0.40 | 0.75 |" "$dir/doc.md" || fail "shm_mpi row"
grep -qF "| all_reduce | 4 | 0.80 | 0.50 | - | - |" "$dir/doc.md" || fail "gloo_raw_large all_reduce row"
grep -qF "| broadcast | 2 | 1.25 | - | - | - |" "$dir/doc.md" || fail "gloo_raw_large broadcast row"
grep -qF "all_reduce bus bandwidth, N=3 4 MiB: 6.00 GB/s; fastest raw (AllreduceRing) 1.50 GB/s." "$dir/doc.md" || fail "bus bandwidth line"
grep -qF "all_reduce bus bandwidth, N=2 4 MiB: 5.00 GB/s, 79% of loopback TCP's 6.25 GB/s in the same run; fastest raw (AllreduceRing) 1.50 GB/s." "$dir/doc.md" || fail "bus bandwidth line with the loopback ceiling"
grep -qF "all_reduce bus bandwidth, N=4 4 MiB: 7.00 GB/s, loopback TCP's 5.50 GB/s in the same run; fastest raw (AllreduceRing) 1.50 GB/s." "$dir/doc.md" || fail "bus bandwidth line with a ceiling but no fraction"
grep -qF -- "-n 2 --backend gloo --op all_reduce,broadcast,all_gather -b 1M -e 64M" "$dir/doc.md" &&
  grep -F -- "-n 2 --backend gloo --op all_reduce,broadcast,all_gather" "$dir/doc.md" | grep -qF -- "--baseline --ceiling" ||
  fail "gloo_raw_large's command does not measure the loopback ceiling"
grep -qF "0 wrong results" "$dir/doc.md" || fail "wrong count"
printf '# no blocks\n' > "$dir/bare.md"
if python3 "$script" --render_only --json_dir "$dir" --doc "$dir/bare.md" 2>"$dir/err" >/dev/null; then
  fail "a document without the block was accepted"
fi
grep -q "has no block for 'gloo_raw'" "$dir/err" || { cat "$dir/err"; fail "the error does not name the block"; }
echo "PASS"
