#!/bin/bash
# Integration test of distbench on the real Gloo plugin: two local ranks
# (-n 2), every collective with --check, CSV/JSON/PNG outputs, the raw Gloo
# baseline, the loopback TCP ceiling, and one-line errors for bad flags.
# Every run is bounded.
set -u
DISTBENCH="$1"
CHECK="$2"  # results_check: JSON/CSV checks and a free port
LIAR="$3"   # a backend whose float32 all_reduce is wrong in element 0
DISTBENCH_MPICH="${4:-}"  # distbench built against MPICH (raw MPICH baseline)
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
export DIST_TIMEOUT=30000
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
run() { timeout -k 5 100 "$DISTBENCH" "$@"; }

# Data rows of the table: lines that start with two spaces and a number.
rows() { grep -E '^ +[0-9]+ ' "$1"; }

# ---- 1. every collective, --check, CSV and JSON ---------------------------
run -n 2 --backend gloo --op all -b 8 -e 64K -w 1 --iters 2 --rounds 1 --check \
    --csv "$TMP/all.csv" --json "$TMP/all.json" --progress=false \
    >"$TMP/all.out" 2>"$TMP/all.err"
rc=$?
if [ $rc -ne 0 ]; then fail "--op all exited $rc"; cat "$TMP/all.err"; else pass "--op all exits 0"; fi
cat "$TMP/all.out"
for column in 'size(B)' count type redop root 'time(us)' 'algbw(GB/s)' 'busbw(GB/s)' '#wrong'; do
  grep -qF -- "$column" "$TMP/all.out" || fail "table lacks column $column"
done
[ "$(grep -c '^# distbench:' "$TMP/all.out")" = 1 ] || fail "the header is not printed exactly once (only rank 0 prints)"
grep -q '^# world size 2' "$TMP/all.out" || fail "header lacks the world size"
grep -q 'backend gloo' "$TMP/all.out" || fail "header lacks the backend"
grep -Eq '^# dist_init [0-9.]+ ms \(slowest rank\), [0-9.]+ ms \(fastest\), [0-9.]+ ms after the last rank called it$' \
  "$TMP/all.out" || fail "header lacks dist_init's three figures"
for op in all_reduce broadcast reduce all_gather gather scatter reduce_scatter all_to_all barrier sendrecv; do
  grep -q "^# $op\$" "$TMP/all.out" || fail "no table for $op"
done
# #wrong is the 9th column; every row must say 0.
bad=$(rows "$TMP/all.out" | awk '$9 != "0"' | wc -l)
nrows=$(rows "$TMP/all.out" | wc -l)
[ "$nrows" -gt 50 ] || fail "expected more than 50 rows, got $nrows"
[ "$bad" = 0 ] && pass "#wrong is 0 in all $nrows rows" || fail "$bad rows have #wrong != 0"
grep -q 'Out of bounds values : 0 OK' "$TMP/all.out" || fail "footer does not say 0 OK"

"$CHECK" all "$TMP/all.json" "$TMP/all.csv" "$nrows" && pass "CSV and JSON parse with the right rows" ||
  fail "CSV/JSON check"

# ---- 1b. --check catches a wrong backend ----------------------------------
run -n 1 --backend "$(cd "$(dirname "$LIAR")" && pwd)/$(basename "$LIAR")" -b 8 -e 64 -w 0 \
    --iters 1 --rounds 1 --check --progress=false >"$TMP/liar.out" 2>"$TMP/liar.err"
rc=$?
cat "$TMP/liar.out"
wrong_rows=$(rows "$TMP/liar.out" | awk '$9 == "1"' | wc -l)
if [ $rc = 1 ] && [ "$wrong_rows" = 4 ] && grep -q 'Out of bounds values : 4 FAILED' "$TMP/liar.out" &&
   grep -q 'wrong results' "$TMP/liar.err"; then
  pass "--check on a lying backend: #wrong 1 per size, footer 4 FAILED, exit 1"
else
  fail "--check on a lying backend: rc $rc, $wrong_rows rows with #wrong 1"; cat "$TMP/liar.err"
fi

# ---- 2. --baseline: raw Gloo side by side ---------------------------------
run -n 2 --backend gloo --op all_reduce,all_gather -b 1K -e 16K -w 1 --iters 2 --rounds 2 --check \
    --baseline --json "$TMP/base.json" --progress=false >"$TMP/base.out" 2>"$TMP/base.err"
rc=$?
cat "$TMP/base.out"
if [ $rc -ne 0 ]; then fail "--baseline exited $rc"; cat "$TMP/base.err"; fi
grep -q '^# baseline: Gloo' "$TMP/base.out" || fail "header does not name the Gloo baseline"
for column in raw_us raw_busbw time_ratio busbw_ratio; do
  grep -qF -- "$column" "$TMP/base.out" || fail "baseline table lacks column $column"
done
# 14 columns per row, ratios positive numbers, the fastest raw variant named.
bad=$(rows "$TMP/base.out" | awk 'NF != 14 || $12 <= 0 || $13 <= 0 || $9 != "0" || $14 == "-"' | wc -l)
[ "$(rows "$TMP/base.out" | wc -l)" = 10 ] || fail "expected 10 baseline rows"
[ "$bad" = 0 ] && pass "baseline rows carry positive ratios" || fail "$bad baseline rows malformed"
"$CHECK" baseline "$TMP/base.json" && pass "baseline JSON has raw results" || fail "baseline JSON"

# ---- 2b. --ceiling: loopback TCP between the same ranks, same rounds ------
run -n 2 --backend gloo --op all_reduce,all_gather,barrier -b 64K -e 1M -f 16 -w 1 --iters 2 \
    --rounds 3 --check --baseline --ceiling --json "$TMP/ceil.json" --progress=false \
    >"$TMP/ceil.out" 2>"$TMP/ceil.err"
rc=$?
cat "$TMP/ceil.out"
if [ $rc -ne 0 ]; then fail "--ceiling exited $rc"; cat "$TMP/ceil.err"; fi
grep -q '^# ceiling: loopback_tcp (plain TCP over 127.0.0.1' "$TMP/ceil.out" ||
  fail "header does not describe the loopback ceiling"
# 16 columns: tcp_busbw and of_tcp after #wrong, then the raw ones; the
# barrier (size 0) moves no bytes and shows "-" for both.
bad=$(rows "$TMP/ceil.out" |
  awk 'NF != 16 || $9 != "0" || ($1 > 0 && ($10 <= 0 || $11 <= 0)) || ($1 == 0 && ($10 != "-" || $11 != "-"))' |
  wc -l)
[ "$(rows "$TMP/ceil.out" | wc -l)" = 5 ] || fail "expected 5 rows with --ceiling"
[ "$bad" = 0 ] && pass "--ceiling rows carry tcp_busbw and of_tcp" || fail "$bad --ceiling rows malformed"
"$CHECK" ceiling "$TMP/ceil.json" && pass "--ceiling JSON has loopback_tcp results" ||
  fail "--ceiling JSON"

# Where it cannot run, the ceiling is skipped with the reason; the run goes on.
run -n 1 --backend gloo -b 8 -e 64 -w 0 --iters 1 --rounds 1 --check --ceiling --progress=false \
    >"$TMP/ceil1.out" 2>"$TMP/ceil1.err"
rc=$?
if [ $rc = 0 ] && grep -q '^# ceiling: skipped: the loopback ceiling needs 2 or more ranks$' "$TMP/ceil1.out" &&
   [ "$(rows "$TMP/ceil1.out" | awk 'NF == 9 && $9 == "0"' | wc -l)" = 4 ]; then
  pass "-n 1 --ceiling: $(grep '^# ceiling' "$TMP/ceil1.out")"
else
  fail "-n 1 --ceiling: rc $rc"; cat "$TMP/ceil1.out" "$TMP/ceil1.err"
fi
# Ranks started by hand without LOCAL_WORLD_SIZE may be on other hosts.
port=$("$CHECK" free_port)
for r in 0 1; do
  env -u LOCAL_WORLD_SIZE RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
    timeout -k 5 60 "$DISTBENCH" --backend gloo -b 8 -e 64 -w 0 --iters 1 --rounds 1 --ceiling \
    --progress=false >"$TMP/hand$r.out" 2>"$TMP/hand$r.err" &
done
wait
if grep -q '^# ceiling: skipped: the loopback ceiling needs every rank on this host' "$TMP/hand0.out" &&
   [ "$(rows "$TMP/hand0.out" | wc -l)" = 4 ]; then
  pass "ranks by hand --ceiling: $(grep '^# ceiling' "$TMP/hand0.out")"
else
  fail "ranks by hand --ceiling"; cat "$TMP/hand0.out" "$TMP/hand0.err" "$TMP/hand1.err"
fi

# ---- 3. --plot: a PNG of this run and of several JSON files ---------------
png_ok() {
  [ -s "$1" ] && [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] &&
    [ "$(stat -c %s "$1")" -gt 5000 ]
}
run --plot "$TMP/two.png" --plot_inputs "$TMP/all.json,$TMP/base.json" 2>"$TMP/plot.err"
rc=$?
[ $rc = 0 ] && png_ok "$TMP/two.png" && pass "--plot_inputs writes a PNG ($(stat -c %s "$TMP/two.png") bytes)" ||
  { fail "--plot_inputs (rc $rc)"; cat "$TMP/plot.err"; }
run -n 2 --backend gloo -b 8 -e 1K -w 0 --iters 1 --rounds 1 --plot "$TMP/run.png" --progress=false \
    >/dev/null 2>"$TMP/plotrun.err"
rc=$?
[ $rc = 0 ] && png_ok "$TMP/run.png" && pass "--plot on a run writes a PNG" ||
  { fail "--plot on a run (rc $rc)"; cat "$TMP/plotrun.err"; }

# ---- 4. --help lists distbench's flags with the usage line and exits 0
# (Debian's Abseil alone would exit 1)
run --help >"$TMP/help.out" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q 'collective benchmarks for dist backends' "$TMP/help.out" &&
   grep -q -- '--iters' "$TMP/help.out" && grep -q -- '--baseline' "$TMP/help.out" &&
   grep -q -- '--plot_inputs' "$TMP/help.out"; then
  pass "--help lists the flags and exits 0"
else
  fail "--help (rc $rc)"; cat "$TMP/help.out"
fi

# ---- 4b. bad flags: non-zero exit and exactly one line on stderr ----------
one_line_error() {
  local expect="$1"; shift
  run "$@" >"$TMP/bad.out" 2>"$TMP/bad.err"
  local rc=$?
  local lines
  lines=$(wc -l <"$TMP/bad.err")
  if [ $rc -ne 0 ] && [ "$lines" = 1 ] && grep -q -- "$expect" "$TMP/bad.err"; then
    pass "$* -> $(cat "$TMP/bad.err")"
  else
    fail "$* gave rc $rc and $lines lines: $(cat "$TMP/bad.err")"
  fi
}
one_line_error "Unknown command line flag 'bogus'" --bogus
one_line_error "'1X' is not a size" -b 1X
one_line_error "unknown --op 'allreduce'" --op allreduce
one_line_error "larger than -e" -b 1M -e 1K
one_line_error "unknown --dtype" --dtype float128
one_line_error "bitwise" --redop band --dtype float32
one_line_error "-f must be 2 or more" -f 1
one_line_error "--iters must be 1 or more" --iters 0
one_line_error "unknown --device" --device gpu
one_line_error "unknown --baseline_library" --baseline --baseline_library=foo
one_line_error "needs --plot" --plot_inputs "$TMP/all.json"
one_line_error "cannot open" --plot "$TMP/x.png" --plot_inputs "$TMP/missing.json"
one_line_error "unexpected argument 'extra'" extra

# A backend that does not exist: each rank fails with one line naming it,
# the launcher reports which ranks failed.
run -n 2 --backend nosuch --progress=false >"$TMP/nob.out" 2>"$TMP/nob.err"
rc=$?
if [ $rc -ne 0 ] && [ "$(grep -c '^distbench: rank [01]: .*nosuch' "$TMP/nob.err")" -ge 1 ]; then
  pass "unknown backend: rc $rc, $(grep -m1 nosuch "$TMP/nob.err")"
else
  fail "unknown backend: rc $rc"; cat "$TMP/nob.err"
fi

# Errors only the group can see: every rank says it in one line.
run -n 2 --backend gloo --root 5 --progress=false >"$TMP/root.out" 2>"$TMP/root.err"
rc=$?
# (The launcher stops the other rank once one fails, so one or both say it.)
if [ $rc = 2 ] && grep -q '^distbench: rank [01]: --root 5 is not a rank of this world of 2$' "$TMP/root.err"; then
  pass "--root 5 on 2 ranks: rc 2, $(grep -m1 'root 5' "$TMP/root.err")"
else
  fail "--root 5: rc $rc"; cat "$TMP/root.err"
fi

# A baseline that cannot run is skipped with the reason; the run goes on.
baseline_skipped() {
  local expect="$1"; shift
  run -n 2 -b 8 -e 64 -w 0 --iters 1 --rounds 1 --check --baseline --progress=false "$@" \
      >"$TMP/skip.out" 2>"$TMP/skip.err"
  local rc=$?
  if [ $rc = 0 ] && grep -q "^# baseline: skipped: .*$expect" "$TMP/skip.out" &&
     [ "$(rows "$TMP/skip.out" | awk 'NF == 9 && $9 == "0"' | wc -l)" = 4 ]; then
    pass "$* --baseline: $(grep '^# baseline' "$TMP/skip.out")"
  else
    fail "$* --baseline: rc $rc"; cat "$TMP/skip.out" "$TMP/skip.err"
  fi
}
baseline_skipped "no raw library known for backend 'shm'" --backend shm
baseline_skipped "needs ranks started by mpirun" --backend gloo --baseline_library=mpi
baseline_skipped "NCCL baseline needs --device=cuda" --backend gloo --baseline_library=nccl

# ---- 5. a rank killed mid-run: the launcher stops the other and says who --
"$DISTBENCH" -n 2 --backend gloo -b 64M -e 64M --iters 1000 --rounds 1 -w 0 \
    >"$TMP/kill.out" 2>"$TMP/kill.err" &
launcher=$!
ranks=""
for _ in $(seq 100); do
  ranks=$(pgrep -P "$launcher" | sort -n)
  [ "$(echo "$ranks" | wc -w)" = 2 ] && break
  sleep 0.1
done
sleep 2
victim=$(echo "$ranks" | tail -1)  # usually rank 1 (forked second)
kill -9 "$victim" 2>/dev/null
rc=""
for _ in $(seq 300); do  # 30 s at most
  if ! kill -0 "$launcher" 2>/dev/null; then wait "$launcher"; rc=$?; break; fi
  sleep 0.1
done
if [ -z "$rc" ]; then
  fail "launcher still running 30 s after a rank was killed"
  kill -9 "$launcher" $ranks 2>/dev/null
elif [ "$rc" -ne 0 ] && grep -q 'rank [01] was killed by signal 9' "$TMP/kill.err"; then
  pass "killed rank: launcher exits $rc: $(grep 'killed by signal 9' "$TMP/kill.err" | head -1)"
else
  fail "killed rank: rc $rc"; cat "$TMP/kill.err"
fi

# ---- 6. raw MPI under mpirun ----------------------------------------------
if command -v mpirun >/dev/null; then
  port=$("$CHECK" free_port)
  extra=()
  [ -n "${DIST_PLUGIN_PATH:-}" ] && extra=(-x DIST_PLUGIN_PATH)
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 5 100 \
    mpirun --oversubscribe -np 2 -x DIST_TIMEOUT "${extra[@]}" \
      -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" \
      "$DISTBENCH" --backend mpi --op all_reduce,all_to_all -b 8 -e 4K -f 8 -w 1 --iters 5 \
      --check --baseline --json "$TMP/mpi.json" --progress=false >"$TMP/mpi.out" 2>"$TMP/mpi.err"
  rc=$?
  cat "$TMP/mpi.out"
  bad=$(rows "$TMP/mpi.out" | awk 'NF != 14 || $12 <= 0 || $9 != "0"' | wc -l)
  if [ $rc = 0 ] && grep -q '^# baseline: Open MPI' "$TMP/mpi.out" && [ "$bad" = 0 ] &&
     [ "$(rows "$TMP/mpi.out" | wc -l)" = 8 ]; then
    pass "mpirun -np 2 --backend mpi --baseline: raw MPI ratios, #wrong 0"
  else
    fail "mpi baseline: rc $rc, $bad bad rows"; cat "$TMP/mpi.err"
  fi
else
  echo "skip: no mpirun in PATH (Debian: openmpi-bin)"
fi

# ---- 7. raw MPICH under mpiexec.mpich -------------------------------------
# DIST_BACKEND=mpi alone: the core picks the MPICH build and mpi://.
if [ -n "$DISTBENCH_MPICH" ] && command -v mpiexec.mpich >/dev/null; then
  timeout -k 5 100 mpiexec.mpich -n 2 \
      "$DISTBENCH_MPICH" --backend mpi --op all_reduce,all_to_all -b 8 -e 4K -f 8 -w 1 --iters 5 \
      --check --baseline --progress=false >"$TMP/mpich.out" 2>"$TMP/mpich.err"
  rc=$?
  cat "$TMP/mpich.out"
  bad=$(rows "$TMP/mpich.out" | awk 'NF != 14 || $12 <= 0 || $9 != "0"' | wc -l)
  if [ $rc = 0 ] && grep -q '^# baseline: MPICH 4' "$TMP/mpich.out" &&
     grep -q 'backend mpich ' "$TMP/mpich.out" && [ "$bad" = 0 ] &&
     [ "$(rows "$TMP/mpich.out" | wc -l)" = 8 ]; then
    pass "mpiexec.mpich -n 2 --backend mpi --baseline: raw MPICH ratios, #wrong 0"
  else
    fail "mpich baseline: rc $rc, $bad bad rows"; cat "$TMP/mpich.err"
  fi
else
  echo "skip: no distbench_mpich or no mpiexec.mpich in PATH (Debian: mpich)"
fi

if [ $failures -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "all distbench checks passed"
