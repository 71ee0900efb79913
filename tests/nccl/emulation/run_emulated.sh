#!/bin/bash
# Runs a command with the CPU emulation standing in for libcudart.so.13 and
# libnccl.so.2 (found first through LD_LIBRARY_PATH; the binaries' RUNPATH
# to /usr/local/cuda/lib64 comes after it), with DEVICES emulated GPUs, and
# checks that its output has EXPECT (so a test that skipped cannot pass).
#
#   run_emulated.sh DEVICES EMULATION_SO EXPECT COMMAND [ARGS...]
set -uo pipefail
devices="$1"; library="$2"; expect="$3"; shift 3
dir="$(mktemp -d "${TEST_TMPDIR:-/tmp}/cuda_emulation.XXXXXX")"
cp -L "$library" "$dir/libcudart.so.13"
# A link, not a copy: the loader then maps the file once, so CUDA and NCCL
# share one emulated device state.
ln -s libcudart.so.13 "$dir/libnccl.so.2"
export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DIST_CUDA_EMULATION_DEVICES="$devices"
echo "CPU emulation of CUDA and NCCL with $devices device(s): $*"
log="$dir/output.log"
"$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [[ $status -ne 0 ]]; then
  echo "FAILED: exit status $status" >&2
  exit "$status"
fi
if ! grep -qE -- "$expect" "$log"; then
  echo "FAILED: the output lacks '$expect' (did the test skip?)" >&2
  exit 1
fi
