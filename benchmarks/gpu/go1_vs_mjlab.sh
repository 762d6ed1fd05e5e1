#!/usr/bin/env bash
# Go1 flat velocity: this library against mjlab on the same GPU, both model variants, 512 / 4096 / 16384 envs.
# On the GPU machine, from the repository root, after staging the ggkit (both parts) and the mjlab kit
# (../shared/gpu/README.md):
#   . /opt/ggkit/env.sh && OUT=/some/dir bash benchmarks/gpu/go1_vs_mjlab.sh
# mjlab runs in its own interpreter with MJ_PYTHONPATH (its mujoco / mujoco-warp shadow ours).
# Budget: <= 8 min in all. The kernels of both sides compile first, in parallel, untimed (~100 s);
# then one `bench` per size (4096 first: the headline), each under its own timeout.
# What comes back under $OUT (flat, 4 files): go1_vs_mjlab.{log,json,md,png}.
set -uo pipefail
OUT=${OUT:?set OUT to an output folder}
ENV_ID=${ENV_ID:-gym_graphreset/Go1-Velocity-Flat-v0}
MJ_PYTHONPATH=${MJ_PYTHONPATH:-/opt/mjkit/site:/opt/ggkit/site}
MJ_PYTHON=${MJ_PYTHON:-python3}
MODES=${MODES:-step graph}
STEPS=${STEPS:-100}
WORK=${WORK:-/tmp/go1_vs_mjlab}
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}. PYTHONUNBUFFERED=1 MUJOCO_GL=disable IMAGEIO_FFMPEG_EXE=/bin/true
LOG="$OUT/go1_vs_mjlab.log"
mkdir -p "$OUT" "$WORK"
: >"$LOG"
log() { echo "[$(date +%T)] $*" | tee -a "$LOG"; }

# mjlab's own go1.xml (found without importing mjlab, which would load its mujoco here)
GO1_XML=$(PYTHONPATH=$MJ_PYTHONPATH "$MJ_PYTHON" -c 'import importlib.util as u, pathlib as p
s = u.find_spec("mjlab"); print(p.Path(s.origin).parent / "asset_zoo/robots/unitree_go1/xmls/go1.xml" if s else "")')
if [[ -z "$GO1_XML" || ! -f "$GO1_XML" ]]; then
  log "mjlab not found on MJ_PYTHONPATH=$MJ_PYTHONPATH: measuring this library's MJCF only, no peer"
  variants=(--variant ours-mjcf)
  peer=()
else
  variants=(--variant ours-mjcf --variant "mjlab-go1:model_xml=$GO1_XML")
  peer=(--peer mjlab --peer-python "$MJ_PYTHON" --peer-pythonpath "$MJ_PYTHONPATH")
fi
bench=(python3 -m gym_graphreset bench --no-progress --env-id "$ENV_ID" --modes "$MODES")

log "compiling kernels (untimed): ours, both variants, and mjlab, in parallel"
timeout 170 "${bench[@]}" --num-envs 64 --steps 2 --warmup 2 --variant ours-mjcf --out "$WORK/prewarm-a" >"$WORK/prewarm-a.log" 2>&1 &
p1=$!
p2=
if ((${#variants[@]} > 2)); then
  timeout 170 "${bench[@]}" --num-envs 64 --steps 2 --warmup 2 "${variants[2]}" "${variants[3]}" --out "$WORK/prewarm-b" \
    >"$WORK/prewarm-b.log" 2>&1 &
  p2=$!
fi
if ((${#peer[@]})); then
  PYTHONPATH=$MJ_PYTHONPATH timeout 170 "$MJ_PYTHON" gym_graphreset/peers/mjlab_runner.py --num-envs 64 --steps 2 \
    --warmup 2 >"$WORK/prewarm-mjlab.log" 2>&1
  log "mjlab prewarm exit status $? ($(tail -c 300 "$WORK/prewarm-mjlab.log" | tail -1 | cut -c1-200))"
fi
wait $p1; log "ours prewarm exit status $? ($(tail -1 "$WORK/prewarm-a.log" | cut -c1-200))"
if [[ -n "$p2" ]]; then wait "$p2"; log "ours mjlab-go1 prewarm exit status $? ($(tail -1 "$WORK/prewarm-b.log" | cut -c1-200))"; fi

# size : its timeout (s) : the peer's timeout inside it (s)
for spec in 4096:100:45 512:70:35 16384:120:55; do
  IFS=: read -r n limit peer_limit <<<"$spec"
  log "x$n (timeout ${limit} s)"
  timeout "$limit" "${bench[@]}" --num-envs "$n" --steps "$STEPS" --warmup 20 "${variants[@]}" \
    ${peer[@]+"${peer[@]}"} --peer-timeout "$peer_limit" --out "$WORK/x$n" 2>&1 \
    | grep -v "^Module \|^Warp \|^   \|^\[INFO\]" | tee -a "$LOG"
  log "x$n exit status ${PIPESTATUS[0]}"
done

python3 - "$WORK" "$OUT" "$ENV_ID" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
from pathlib import Path
from gym_graphreset.bench import env_versions
from gym_graphreset.peers.compare import comparison_table, load_results
from gym_graphreset.plotting import plot_peer_comparison
work, out, env_id = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
paths = sorted(work.glob("x*/bench-*.json"), key=lambda p: int(p.parent.name[1:]))
results = load_results(paths)
table = comparison_table(results)
print(table)
(out / "go1_vs_mjlab.md").write_text(table + "\n")
from dataclasses import asdict
(out / "go1_vs_mjlab.json").write_text(json.dumps(
    {"versions": env_versions(), "sources": [str(p) for p in paths], "results": [asdict(r) for r in results]}, indent=1))
plot_peer_comparison(results, out / "go1_vs_mjlab.png", f"{env_id} vs mjlab, same GPU")
print(f"wrote {out}/go1_vs_mjlab.{{json,md,png}} from {len(paths)} size(s)")
EOF
