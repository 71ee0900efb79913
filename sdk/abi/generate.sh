#!/usr/bin/env bash
# bazel run //sdk/abi:generate — rewrites sdk/abi/abi_v1.txt from the current
# headers and libdist.so. Run it after a deliberate, version-bumped append.
set -euo pipefail
here=${RUNFILES_DIR:-$0.runfiles}/dist
out=${BUILD_WORKSPACE_DIRECTORY:?run me with bazel run}/sdk/abi/abi_v1.txt
"$here/sdk/abi/describe.sh" "$here/sdk/abi/abi_gen" "$here/core/libdist.so" > "$out"
echo "wrote $out ($(grep -vc '^#' "$out") items); review the diff and commit it"
