#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang++-14 (ASan + UBSan)
# directly, outside Bazel (whose toolchain is gcc: switching it would
# rebuild everything), replays every saved crash in tests/fuzz/regressions,
# then fuzzes each target for FUZZ_SECONDS (default 20) from the seed corpus
# in tests/fuzz/corpus. New corpus entries go to a scratch directory, not the
# repository. Exit status 0 only when nothing crashed. The mutations follow
# a fixed seed (FUZZ_SEED, default 1), so that CI is reproducible: the same
# tree fuzzes the same inputs. FUZZ_SEED=0 picks a new seed each run, for
# hunting. FUZZ_SECONDS=0 only replays the saved corpus and crashes.
#
#   tools/dev/fuzz.sh                 # every target, 20 s each
#   FUZZ_SECONDS=300 FUZZ_SEED=0 tools/dev/fuzz.sh server_fuzz
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${FUZZ_SECONDS:-20}
seed=${FUZZ_SEED:-1}
# One build directory per checkout: objects are reused by modification time,
# so two checkouts sharing one would link each other's objects.
out=${DIST_FUZZ_OUT:-${TMPDIR:-/tmp}/dist-fuzz-$(id -u)-$(pwd | md5sum | cut -c1-12)}
mkdir -p "$out/obj" "$out/bin"
cxx=${FUZZ_CXX:-clang++-14}
command -v "$cxx" >/dev/null || { echo "fuzz: $cxx not found (apt-get install clang-14 libfuzzer-14-dev)" >&2; exit 1; }

flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer -I. -Isdk/include
       -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
       -Wno-unused-command-line-argument)
absl_libs=($(grep -o -- '-labsl_[a-z0-9_]*' third_party/system/system.BUILD))

store=(plugins/store/protocol.cc plugins/store/limits.cc plugins/store/kv_table.cc)
# TcpStoreServer and its event loop (plugins/store/tcp_store_server_loop.h).
server=(plugins/store/tcp_store_server.cc plugins/store/server_accept.cc plugins/store/server_io.cc
        plugins/store/server_handshake.cc plugins/store/server_requests.cc
        plugins/store/server_parking.cc)
declare -A sources=(
  [protocol_fuzz]="${store[*]}"
  [server_fuzz]="${store[*]} plugins/store/server_limits.cc ${server[*]} plugins/store/tcp_store_client.cc plugins/store/net.cc support/auth.cc support/descriptors.cc"
  [file_store_fuzz]="${store[*]} plugins/store/file_store.cc"
  [url_fuzz]="support/url.cc"
  [config_fuzz]="core/config.cc core/toml_text.cc core/logging.cc core/mpi_flavor.cc"
)
declare -A libs=(
  [server_fuzz]="-luv -lcrypto"
  [config_fuzz]="-ltomlplusplus"
)

# One object per source, rebuilt when the source or a header of the tree
# is newer than it.
# (sort | tail reads all of find's output: under pipefail, `ls -t | head -1`
# failed once the list outgrew one stdio buffer, ls dying of SIGPIPE.)
newest_header=$(find plugins core sdk/include support \( -name '*.h' -o -name '*.hpp' \) -printf '%T@ %p\n' |
  sort -n | tail -1 | cut -d' ' -f2-)
compile() {
  local source=$1 object="$out/obj/${1//\//_}.o"
  if [[ ! -f $object || $source -nt $object || $newest_header -nt $object ]]; then
    "$cxx" "${flags[@]}" -c "$source" -o "$object"
  fi
  echo "$object"
}

targets=("$@")
if ((${#targets[@]} == 0)); then targets=(protocol_fuzz server_fuzz file_store_fuzz url_fuzz config_fuzz); fi

failed=0
for target in "${targets[@]}"; do
  objects=("$(compile "tests/fuzz/$target.cc")")
  for source in ${sources[$target]}; do objects+=("$(compile "$source")"); done
  "$cxx" "${flags[@]}" -fsanitize=fuzzer "${objects[@]}" ${libs[$target]:-} "${absl_libs[@]}" \
    -lpthread -o "$out/bin/$target"

  regressions=(tests/fuzz/regressions/$target/*)
  if [[ -e ${regressions[0]} ]]; then
    if ! "$out/bin/$target" -runs=1 "${regressions[@]}" >"$out/$target.regressions.log" 2>&1; then
      echo "fuzz: $target: a saved crash crashes again; see $out/$target.regressions.log" >&2
      tail -30 "$out/$target.regressions.log" >&2
      failed=1
      continue
    fi
  fi

  scratch="$out/corpus/$target"
  mkdir -p "$scratch" "$out/artifacts"
  # FUZZ_SECONDS=0: run every saved input once, no new ones (a replay).
  budget=(-max_total_time="$seconds")
  ((seconds == 0)) && budget=(-runs=0)
  if "$out/bin/$target" "${budget[@]}" -timeout=10 -rss_limit_mb=2048 -seed="$seed" \
      -artifact_prefix="$out/artifacts/$target-" -print_final_stats=1 \
      "$scratch" "tests/fuzz/corpus/$target" >"$out/$target.log" 2>&1; then
    runs=$(grep -a -o 'stat::number_of_executed_units: *[0-9]*' "$out/$target.log" | grep -o '[0-9]*$' | tail -1 || echo '?')
    if ((seconds == 0)); then
      echo "fuzz: $target: every saved input replayed, no crash"
    else
      echo "fuzz: $target: ${seconds} s, ${runs} runs, no crash"
    fi
  else
    echo "fuzz: $target: CRASH; input in $out/artifacts/, log $out/$target.log" >&2
    grep -a -m1 -A20 'ERROR: \|runtime error\|deadly signal' "$out/$target.log" >&2 || tail -30 "$out/$target.log" >&2
    failed=1
  fi
done
exit $failed
