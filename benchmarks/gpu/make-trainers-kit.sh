#!/usr/bin/env bash
# Wheels for the trainer adapters on the GPU machine (Python 3.12, no downloads there): rsl_rl, skrl and what
# they import. Writes .gpu/trainers/ (git-ignored, ~10 MB): carry it and run `bash .gpu/trainers/stage.sh`,
# which unpacks the wheels into /opt/trainers/site; then put that folder on PYTHONPATH.
# rsl-rl-lib is pinned to mjlab 1.6's own pin (its wheel's METADATA: Requires-Dist rsl-rl-lib==5.4.2; the mjlab
# kit carries the same), so the like-for-like runs (like_for_like.sh) use one rsl_rl on both sides;
# each training JSON records it (versions["rsl-rl-lib"], rsl_rl_lib). RSL_RL_VERSION overrides the pin.
set -euo pipefail
rsl_rl_version=${RSL_RL_VERSION:-5.4.2}
kit=.gpu/trainers
rm -rf "$kit" && mkdir -p "$kit/wheels"
pip=${PIP:-.venv/bin/pip}
[ -x "$pip" ] || pip="python3 -m pip"
$pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$kit/wheels" \
  "rsl-rl-lib==$rsl_rl_version" tensordict==0.15.3 orjson "pyvers>=0.2,<0.3" cloudpickle importlib_metadata zipp \
  gitpython gitdb smmap skrl==2.1.1 tensorboard tensorboard-data-server protobuf absl-py markdown werkzeug markupsafe
cat > "$kit/stage.sh" <<'STAGE'
#!/usr/bin/env bash
# Unpack the trainer wheels (no pip needed): PYTHONPATH=/opt/trainers/site:... imports them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p /opt/trainers/site
for w in "$here"/wheels/*.whl; do python3 -m zipfile -e "$w" /opt/trainers/site; done
PYTHONPATH=/opt/trainers/site:${PYTHONPATH:-} python3 -c "import rsl_rl, tensordict, skrl; from importlib.metadata import version; print('trainers staged: rsl-rl-lib', version('rsl-rl-lib'), rsl_rl.__file__, 'tensordict', tensordict.__version__, 'skrl', skrl.__version__)"
STAGE
chmod +x "$kit/stage.sh"
du -sh "$kit"
