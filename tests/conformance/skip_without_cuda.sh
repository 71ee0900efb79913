#!/bin/sh
echo "SKIP: nccl conformance: this build found no CUDA (@local_cuda CUDA_FOUND = False)"
