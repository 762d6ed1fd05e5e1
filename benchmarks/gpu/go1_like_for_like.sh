#!/usr/bin/env bash
# The flat velocity comparison of benchmarks/gpu/like_for_like.sh under its former name: ROBOT (go1, default, or
# g1) is its TASK; every other setting (RUN, SEED, BUDGET_S, OUT, ...) passes through. See like_for_like.sh.
if [[ -n ${TASK:-} ]]; then
  echo "go1_like_for_like.sh takes ROBOT (go1 or g1), not TASK: run benchmarks/gpu/like_for_like.sh for TASK=$TASK" >&2
  exit 2
fi
case ${ROBOT:-go1} in
  go1 | g1) ;;
  *) echo "ROBOT must be go1 or g1, got '$ROBOT' (like_for_like.sh's TASK also takes g1-tracking and go1-rough)" >&2; exit 2 ;;
esac
TASK=${ROBOT:-go1} exec bash "$(dirname "$0")/like_for_like.sh"
