# Sourced by the Python tests: installs dist (//:install, the script given
# as $1) into a fresh prefix that PYTHONPATH points into, as a user has it,
# and defines `run`. Callers set `set -euo pipefail` first.
install=$1
python=/usr/bin/python3  # Debian's, with NumPy and torch
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
here=$(cd "$(dirname "$0")" && pwd)
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
"$install" "$prefix" >/dev/null
export PYTHONPATH=$prefix/lib/python3/dist-packages
unset DIST_LIBRARY  # the package must find PREFIX/lib/libdist.so itself
distrun=$prefix/bin/distrun
failures=0

# run LABEL N CMD...: passes when N lines of the output say "checks passed"
# or "trained N steps" (one per rank that finished its checks).
run() {
  local label=$1 want=$2; shift 2
  local out passed
  out=$(timeout 180 "$@" 2>&1) || true
  passed=$(grep -cE "checks passed|trained [0-9]+ steps" <<<"$out" || true)
  if [[ $passed -eq $want ]]; then
    echo "ok   $label ($(grep -m1 -oE '[0-9]+ checks passed( on [a-z]+)?|trained .*' <<<"$out"))"
  else
    echo "FAIL $label ($passed of $want ranks passed)"; tail -25 <<<"$out"; failures=$((failures + 1))
  fi
}
