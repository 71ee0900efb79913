#!/bin/bash
# The nccl plugin exports exactly one dynamic symbol, its entry point, so
# that its copies of Abseil (and anything else) never clash with another
# plugin's or the host's. Also checks that it links libnccl and libcudart
# by absolute rpath, so it loads outside the Bazel tree.
set -euo pipefail
plugin="$1"
symbols="$(nm -D --defined-only "$plugin" | awk '{print $3}' | sort)"
if [[ "$symbols" != "dist_backend_plugin_v1" ]]; then
  echo "FAIL: $plugin exports more than its entry symbol:" >&2
  echo "$symbols" >&2
  exit 1
fi
# (Read objdump's output whole: grep -q closing the pipe early would make
# objdump fail under pipefail.)
headers="$(objdump -p "$plugin")"
for library in libnccl.so libcudart.so; do
  if ! grep -q "NEEDED *$library" <<<"$headers"; then
    echo "FAIL: $plugin does not link $library" >&2
    exit 1
  fi
done
if ! grep -Eq "(RUNPATH|RPATH) .*/lib64" <<<"$headers"; then
  echo "FAIL: $plugin has no rpath to the CUDA libraries" >&2
  grep -E "RUNPATH|RPATH" <<<"$headers" >&2 || true
  exit 1
fi
echo "PASS: only dist_backend_plugin_v1 is exported"
