#!/usr/bin/env bash
# The table against mjlab, several robots in one command: benchmarks/gpu/peer_rounds.sh for each of ROBOTS in
# turn, each stopped at its share of DEADLINE_S, the results packed into one archive (a command whose files come
# back to another machine may be limited in their number).
# From the repository root on a GPU machine, warp's kernels cached (benchmarks/gpu/warm_cache.py), mjlab on
# MJ_PYTHONPATH:
#   OUT=/some/dir ROBOTS="g1 g1-tracking" bash benchmarks/gpu/rounds_table.sh
# Writes $OUT/rounds.tgz (each robot's bench JSON, rounds table, plots and run.log under <robot>/) and
# $OUT/rounds-table.md (every robot's rounds table, one after the other). MODES, SIZES, ROUNDS, STEPS, WARMUP,
# OUTPUTS and BUDGET_VARIANT pass through to peer_rounds.sh; DEADLINE_S (570) is this whole command's, shared evenly.
set -uo pipefail
OUT=${OUT:?set OUT to an output folder}
ROBOTS=${ROBOTS:-go1 g1 g1-tracking}
DEADLINE_S=${DEADLINE_S:-570}
export MODES=${MODES:-step graph+compile}
if [[ -n ${OUTPUTS:-} && $OUTPUTS != 0 && $OUTPUTS != 1 ]]; then
  echo "OUTPUTS must be 1 (time the mjlab-outputs variant too) or 0 (leave it out), got $OUTPUTS" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
read -ra robots <<<"$ROBOTS"
if ((${#robots[@]} == 0)); then echo "ROBOTS is empty: name one or more of go1 g1 go1-rough g1-rough g1-tracking" >&2; exit 2; fi
for robot in "${robots[@]}"; do
  case $robot in
    go1 | g1 | go1-rough | g1-rough | g1-tracking) ;;
    *) echo "ROBOTS must name go1, g1, go1-rough, g1-rough or g1-tracking, got $robot" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d)
mkdir -p "$OUT"
: >"$OUT/rounds-table.md"
share=$((DEADLINE_S / ${#robots[@]} - 10))
status=0
for robot in "${robots[@]}"; do
  echo "[$(date +%T)] $robot: up to $share s"
  mkdir -p "$work/$robot"
  OUT=$work/$robot ROBOT=$robot DEADLINE_S=$share bash "$here/peer_rounds.sh" >"$work/$robot/run.log" 2>&1 || status=$?
  tail -3 "$work/$robot/run.log"
  for table in "$work/$robot"/*-rounds.md; do
    [[ -f $table ]] && { echo "## $robot"; cat "$table"; echo; } >>"$OUT/rounds-table.md"
  done
done
tar -C "$work" -czf "$OUT/rounds.tgz" .
cat "$OUT/rounds-table.md"
exit "$status"
