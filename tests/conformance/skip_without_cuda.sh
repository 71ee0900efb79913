#!/bin/sh
echo "DIST_SKIPPED: nccl conformance: this build found no CUDA (@local_cuda CUDA_FOUND = False)"
