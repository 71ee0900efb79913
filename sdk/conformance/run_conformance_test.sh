#!/usr/bin/env bash
# Test wrapper of dist_conformance_test(): runs the kit with the arguments the
# macro chose (binary first). Separate so that Bazel's args expand labels.
set -uo pipefail
exec "$@"
