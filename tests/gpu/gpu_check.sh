#!/bin/bash
# The GPU check of the nccl backend, in one go (under 5 minutes): builds the
# plugin, its tests and its benchmark, runs the tests on the GPU(s), then
# the benchmark (plugin vs raw NCCL all-reduce bandwidth, side by side in one
# run) at world size 1 and, with more than one GPU, across all GPUs.
#
#   tests/gpu/gpu_check.sh                 build with Bazel here, then run (a GPU
#                                          machine with the project's toolchain)
#   tests/gpu/gpu_check.sh --pack DIR      on a build machine (no GPU needed): build
#                                          with Bazel and copy the binaries and the
#                                          shared libraries they need (not NCCL) to DIR
#   tests/gpu/gpu_check.sh --prebuilt DIR  on a GPU machine without Bazel: run what
#                                          --pack put in DIR (NCCL from /usr/local/cuda,
#                                          else from a pip nvidia-nccl package)
#
# A dry run of this script without a GPU (to check the script itself before
# spending device time): pack, put the CPU emulation in as the CUDA runtime
# and NCCL, and keep the benchmark small, e.g.
#   tests/gpu/gpu_check.sh --pack /tmp/p && bazel build //tests/nccl/emulation/...
#   cp -f bazel-bin/tests/nccl/emulation/libcuda_nccl_emulation.so /tmp/p/lib/libcudart.so.13
#   ln -sf libcudart.so.13 /tmp/p/lib/libnccl.so.2
#   DIST_GPU_CHECK_BENCH_FLAGS=--max_bytes=16777216 tests/gpu/gpu_check.sh --prebuilt /tmp/p
#
# Exit status: 0 all passed, 1 a build, test or benchmark failed, 2 no GPU
# visible (the check cannot run). Nothing here needs more than one GPU; see
# plugins/backends/nccl/README.md for what only runs with two or more.
set -uo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
mode="bazel"
dir=""
case "${1:-}" in
  --pack) mode="pack"; dir="${2:?--pack needs a directory}" ;;
  --prebuilt) mode="prebuilt"; dir="${2:?--prebuilt needs a directory}" ;;
  "") ;;
  *) echo "usage: $0 [--pack DIR | --prebuilt DIR]" >&2; exit 1 ;;
esac
start=$SECONDS
step() { echo; echo "=== [$((SECONDS - start))s] $*"; }
fail() { echo "GPU CHECK FAILED: $*" >&2; exit 1; }

targets=(//plugins/backends/nccl/... //tests/nccl/... //tests/ddp:gradient_reducer_cuda_test
         //examples/gpu_allreduce //tools/distrun)
# What --pack copies: programs (to DIR) and the plugins the core loads (to
# DIR/lib/dist/plugins, beside libdist.so, where the core looks for them).
programs=(plugins/backends/nccl/libdist-backend-nccl.so plugins/backends/nccl/bench/nccl_bench
          tests/nccl/gpu_collectives_test tests/nccl/core_integration_test
          tests/nccl/plugin_load_test tests/ddp/gradient_reducer_cuda_test
          examples/gpu_allreduce/gpu_allreduce tools/distrun/distrun)
plugins=(libdist-backend-nccl.so libdist-backend-gloo.so libdist-rendezvous-file.so
         libdist-rendezvous-env.so libdist-rendezvous-tcp.so)

build() {
  step "bazel build ${targets[*]}"
  (cd "$repo" && timeout 180 bazel build "${targets[@]}") || fail "bazel build"
}

if [[ "$mode" == "pack" ]]; then
  build
  bin="$repo/bazel-bin"
  mkdir -p "$dir/lib/dist/plugins"
  files=("$bin/core/libdist.so")
  for program in "${programs[@]}"; do
    cp -f "$bin/$program" "$dir/" || fail "copying $program"
    files+=("$bin/$program")
  done
  cp -f "$bin/core/libdist.so" "$dir/lib/" || fail "copying libdist.so"
  for plugin in "${plugins[@]}"; do
    cp -fL "$bin/core/dist/plugins/$plugin" "$dir/lib/dist/plugins/" || fail "copying $plugin"
    files+=("$bin/core/dist/plugins/$plugin")
  done
  chmod -R u+w "$dir"
  # Shared libraries that a CUDA machine's image may lack (Abseil, Gloo,
  # ...); glibc, libstdc++ and NCCL (218 MB) stay behind, CUDA's runtime
  # travels.
  for f in "${files[@]}"; do
    ldd "$f" | awk '/=> \// {print $3}'
  done | sort -u | grep -Ev '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|ld-linux[^/]*|libnccl|libdist)\.so' |
    while read -r lib; do cp -fL "$lib" "$dir/lib/"; done
  du -sh "$dir"
  echo "packed into $dir; on the GPU machine: tests/gpu/gpu_check.sh --prebuilt $dir"
  exit 0
fi

# Everything here runs on one host: keep NCCL's bootstrap on loopback and
# let it print its warnings.
export NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}"
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}"

step "GPUs"
if command -v nvidia-smi >/dev/null; then nvidia-smi -L || true; else echo "(no nvidia-smi)"; fi

if [[ "$mode" == "bazel" ]]; then
  build
  plugin="$repo/bazel-bin/plugins/backends/nccl/libdist-backend-nccl.so"
  gpu_test="$repo/bazel-bin/tests/nccl/gpu_collectives_test"
  load_test="$repo/bazel-bin/tests/nccl/plugin_load_test"
  core_test="$repo/bazel-bin/tests/nccl/core_integration_test"
  reducer_test="$repo/bazel-bin/tests/ddp/gradient_reducer_cuda_test"
  example="$repo/bazel-bin/examples/gpu_allreduce/gpu_allreduce"
  distrun="$repo/bazel-bin/tools/distrun/distrun"
  bench="$repo/bazel-bin/plugins/backends/nccl/bench/nccl_bench"
else
  dir="$(cd "$dir" && pwd)"
  plugin="$dir/libdist-backend-nccl.so"
  gpu_test="$dir/gpu_collectives_test"
  load_test="$dir/plugin_load_test"
  core_test="$dir/core_integration_test"
  reducer_test="$dir/gradient_reducer_cuda_test"
  example="$dir/gpu_allreduce"
  distrun="$dir/distrun"
  bench="$dir/nccl_bench"
  extra="$dir/lib"
  if [[ ! -e /usr/local/cuda/lib64/libnccl.so.2 ]]; then
    nccl_dir="$(find / -xdev -path '*nvidia/nccl/lib/libnccl.so.2' -printf '%h\n' -quit 2>/dev/null)"
    [[ -n "$nccl_dir" ]] || fail "no libnccl.so.2 in /usr/local/cuda/lib64 nor in a pip nvidia-nccl package"
    extra="$extra:$nccl_dir"
  fi
  export LD_LIBRARY_PATH="$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
fi

step "plugin load test (probe must find the GPU)"
timeout 60 "$load_test" "$plugin" | tee /tmp/nccl_load_test.log
[[ ${PIPESTATUS[0]} -eq 0 ]] || fail "plugin_load_test"
if grep -q "probe says: unavailable" /tmp/nccl_load_test.log; then
  grep "probe says" /tmp/nccl_load_test.log >&2
  echo "GPU CHECK NOT RUN: the plugin sees no usable GPU here" >&2
  exit 2
fi

step "GPU tests (every collective x dtype x reduction vs host references, streams, timeouts, abort, split)"
timeout 180 "$gpu_test" "$plugin" | tee /tmp/nccl_gpu_test.log
[[ ${PIPESTATUS[0]} -eq 0 ]] || fail "gpu_collectives_test"
grep -q "checked .* cases on world size" /tmp/nccl_gpu_test.log ||
  fail "the collective test did not run (skipped?)"
grep "SKIPPED" /tmp/nccl_gpu_test.log | sort -u || true

step "through the core (libdist.so loads the bundled plugin; file:// rendezvous, one rank)"
TEST_TMPDIR="$(mktemp -d)" timeout 60 "$core_test" | tee /tmp/nccl_core_test.log
[[ ${PIPESTATUS[0]} -eq 0 ]] || fail "core_integration_test"
grep -q "OK \] NcclThroughTheCore.AllReducesCudaBuffersOnOneGpu" /tmp/nccl_core_test.log ||
  fail "the core integration test did not run (skipped?)"

step "GradientReducer with buckets on the GPU(s), over nccl through the core"
TEST_TMPDIR="$(mktemp -d)" timeout 60 "$reducer_test" | tee /tmp/nccl_reducer_test.log
[[ ${PIPESTATUS[0]} -eq 0 ]] || fail "gradient_reducer_cuda_test"
grep -q "averaged device gradients on world size" /tmp/nccl_reducer_test.log ||
  fail "the reducer test did not run (skipped?)"

gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')"
[[ "$gpus" =~ ^[0-9]+$ && "$gpus" -ge 1 ]] || gpus=1

step "device map: host buffers on gloo, GPU buffers on nccl, $gpus rank(s) started by distrun"
DIST_BACKEND=cpu:gloo,cuda:nccl timeout 60 "$distrun" -n "$gpus" "$example" |
  tee /tmp/nccl_device_map.log
[[ ${PIPESTATUS[0]} -eq 0 ]] || fail "gpu_allreduce"
grep -q "cpu all_reduce via gloo correct, cuda:0 all_reduce via nccl correct" \
  /tmp/nccl_device_map.log || fail "gpu_allreduce did not report both all-reduces correct"
step "benchmark, world size 1"
timeout 120 "$bench" --plugin="$plugin" --world_size=1 ${DIST_GPU_CHECK_BENCH_FLAGS:-} ||
  fail "nccl_bench --world_size=1"
if [[ "$gpus" -gt 1 ]]; then
  step "benchmark, world size $gpus (one rank per GPU)"
  timeout 120 "$bench" --plugin="$plugin" --world_size="$gpus" ${DIST_GPU_CHECK_BENCH_FLAGS:-} ||
    fail "nccl_bench --world_size=$gpus"
else
  echo "(one GPU: the multi-rank benchmark and send/recv need 2 or more)"
fi
step "GPU CHECK PASSED in $((SECONDS - start))s"
