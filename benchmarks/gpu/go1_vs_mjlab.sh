#!/usr/bin/env bash
# Go1 flat velocity against mjlab on the same GPU: benchmarks/gpu/vs_mjlab.sh with ROBOT=go1 (see there).
#   OUT=/some/dir bash benchmarks/gpu/go1_vs_mjlab.sh
ROBOT=go1 exec bash "$(dirname "$0")/vs_mjlab.sh" "$@"
