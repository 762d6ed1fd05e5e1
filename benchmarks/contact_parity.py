"""How far MuJoCo Warp's contact dynamics are from MuJoCo C's, and that the env adds nothing to it.

From states along a random-action Ant-v5 trajectory (contacts active), one env step (5 substeps) is taken
by MuJoCo C (``mujoco.mj_step``), by raw ``mujoco_warp`` (``mujoco_warp.step`` on one world) and by this
library's ``AntEnv`` (its physics call), all from the same qpos/qvel/ctrl. Prints the largest |qvel|
difference of each pair, per state and overall, and writes JSON.

    python benchmarks/contact_parity.py --states 20 --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import mujoco
import numpy as np
import torch

from gym_graphreset.envs.gym_mujoco.base import gymnasium_asset
from gym_graphreset.envs.gym_mujoco.tasks import AntEnv


def main(argv: list[str] | None = None) -> int:
    """Measure and print the three differences."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--states", type=int, default=20, help="states along the trajectory (default: 20)")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = p.parse_args(argv)
    import mujoco_warp as mjw
    import warp as wp

    mjm = mujoco.MjModel.from_xml_path(str(gymnasium_asset("ant.xml")))
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(0)
    env = AntEnv(1, device="cpu")
    m = mjw.put_model(mjm)
    d = mjw.make_data(mjm, nworld=1, nconmax=env.d.naconmax, njmax=env.d.njmax)
    rows = []
    for k in range(args.states):
        for _ in range(10):  # walk on: a new contact state every 10 env steps
            mjd.ctrl[:] = rng.uniform(-1, 1, mjm.nu)
            mujoco.mj_step(mjm, mjd, nstep=5)
        qpos, qvel, ctrl = mjd.qpos.copy(), mjd.qvel.copy(), rng.uniform(-1, 1, mjm.nu)
        c = mujoco.MjData(mjm)
        c.qpos[:], c.qvel[:], c.ctrl[:] = qpos, qvel, ctrl
        mujoco.mj_step(mjm, c, nstep=5)
        wp.copy(d.qpos, wp.array(qpos[None].astype(np.float32)))
        wp.copy(d.qvel, wp.array(qvel[None].astype(np.float32)))
        wp.copy(d.ctrl, wp.array(ctrl[None].astype(np.float32)))
        for _ in range(5):
            mjw.step(m, d)
        warp_qvel = d.qvel.numpy()[0]
        env.set_state(torch.as_tensor(qpos), torch.as_tensor(qvel))
        env.run_physics(torch.as_tensor(ctrl, dtype=torch.float32).unsqueeze(0))
        ours = env.qvel[0].numpy()
        rows.append(
            {
                "state": k,
                "contacts_after": int(c.ncon),
                "warp_vs_c": float(np.abs(warp_qvel - c.qvel).max()),
                "env_vs_c": float(np.abs(ours - c.qvel).max()),
                "env_vs_warp": float(np.abs(ours - warp_qvel).max()),
            }
        )
        print(rows[-1])
    summary = {k: max(r[k] for r in rows) for k in ("warp_vs_c", "env_vs_c", "env_vs_warp")}
    summary["median_warp_vs_c"] = float(np.median([r["warp_vs_c"] for r in rows]))
    print("max |dqvel| after one env step:", summary)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "contact-parity-Ant-v5-cpu.json").write_text(json.dumps({"summary": summary, "states": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
