"""Warm GPU starts: build warp's kernel cache and Inductor's cache once, carry them to a fresh GPU machine.

A fresh GPU machine compiles MuJoCo Warp's kernels for minutes per model (and Inductor's step for a minute
more) before the first captured step. This script builds both caches for the shipped legged tasks once, packs
them into parts small enough to copy, and stages them on another machine, which then starts warm:

    # on a GPU machine (warp, mujoco-warp, gymnasium installed; mjlab on MJ_PYTHONPATH for its side)
    python benchmarks/gpu/warm_cache.py build --out /some/dir            # compiles, then writes the parts
    # on a fresh GPU machine of the same kind, with the parts copied to DIR
    python benchmarks/gpu/warm_cache.py stage DIR --root /opt/ggcache    # checks the key, unpacks
    . /opt/ggcache/env.sh                                                # WARP_CACHE_PATH, TORCHINDUCTOR_CACHE_DIR
    python benchmarks/gpu/warm_cache.py first-step                       # seconds to each task's first captured step

A cache is keyed by what makes its binaries valid: the warp, torch, Triton and CUDA versions, the GPU's compute
capability and Python's version. ``stage`` refuses a pack whose key differs from the machine's, naming each
field, before it writes anything: a stale cache would only be recompiled, silently costing the minutes it was
meant to save. Kernels of models or settings not in the pack still compile on first use, as without it.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import io
import json
import lzma
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

MANIFEST = "warmcache.json"
PART_BYTES = 15 * 2**20
"""Bytes per part: under the 16 MiB a file may take back from the GPU machine."""
KEY_FIELDS = ("warp", "torch", "triton", "cuda", "arch", "python")
TASKS: dict[str, tuple[str, str]] = {
    # label -> (our env id, mjlab's task on the same robot and terrain)
    "go1": ("gym_graphreset/Go1-Velocity-Flat-v0", "Mjlab-Velocity-Flat-Unitree-Go1"),
    "go1-rough": ("gym_graphreset/Go1-Velocity-Rough-v0", "Mjlab-Velocity-Rough-Unitree-Go1"),
    "g1": ("gym_graphreset/G1-Velocity-Flat-v0", "Mjlab-Velocity-Flat-Unitree-G1"),
    "g1-rough": ("gym_graphreset/G1-Velocity-Rough-v0", "Mjlab-Velocity-Rough-Unitree-G1"),
    "g1-tracking": ("gym_graphreset/G1-Tracking-Flat-v0", "Mjlab-Tracking-Flat-Unitree-G1"),
}


class KeyMismatch(RuntimeError):
    """The pack was built for another machine or other versions than this one's."""


def _version(dist: str, module: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        try:
            return str(getattr(__import__(module), "__version__", "none"))
        except ImportError:
            return "none"


def machine_key() -> dict[str, str]:
    """This machine's cache key: the versions and the GPU architecture compiled binaries depend on."""
    import torch

    arch = "none"
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        arch = f"sm_{major}{minor}"
    return {
        "warp": _version("warp-lang", "warp"),
        "torch": torch.__version__,
        "triton": _version("triton", "triton"),
        "cuda": str(torch.version.cuda),
        "arch": arch,
        "python": platform.python_version().rsplit(".", 1)[0],
    }


def key_problems(packed: Mapping[str, str], here: Mapping[str, str]) -> list[str]:
    """Each key field that differs between the pack and this machine, as ``field: pack X, this machine Y``."""
    return [
        f"{name}: pack {packed.get(name)!r}, this machine {here.get(name)!r}"
        for name in KEY_FIELDS
        if packed.get(name) != here.get(name)
    ]


@dataclass(frozen=True)
class CacheDirs:
    """Where each cache lives: warp's base folder (``WARP_CACHE_PATH``) and Inductor's (``TORCHINDUCTOR_CACHE_DIR``)."""

    warp: Path
    inductor: Path

    @classmethod
    def under(cls, root: Path) -> CacheDirs:
        return cls(warp=root / "warp", inductor=root / "inductor")

    @classmethod
    def from_env(cls) -> CacheDirs:
        """The folders this process's environment names, else the two libraries' defaults."""
        import getpass
        import tempfile

        warp = Path(os.environ.get("WARP_CACHE_PATH", Path.home() / ".cache" / "warp"))
        default_inductor = Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}"
        return cls(warp=warp, inductor=Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", default_inductor)))

    def env(self) -> dict[str, str]:
        return {"WARP_CACHE_PATH": str(self.warp), "TORCHINDUCTOR_CACHE_DIR": str(self.inductor)}

    def items(self) -> list[tuple[str, Path]]:
        return [("warp", self.warp), ("inductor", self.inductor)]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def _skipped(name: str) -> bool:
    """Files a warm start does not read: warp's generated sources and locks, Inductor's temporaries."""
    return name.endswith((".cu", ".cpp", ".lock", ".tmp")) or name.startswith("tmp")


def _xz(data: bytes) -> bytes:
    """``data`` compressed as .xz: by the ``xz`` tool on every core where there is one, else by Python's lzma."""
    if shutil.which("xz"):
        return subprocess.run(["xz", "-T0", "-6", "-c"], input=data, capture_output=True, check=True).stdout
    return lzma.compress(data, preset=6)


def pack(dirs: CacheDirs, out: Path, key: Mapping[str, str], part_bytes: int = PART_BYTES) -> list[Path]:
    """Both caches as one xz tar split into ``warmcache.partNN`` files of at most ``part_bytes``, and the manifest.

    Returns:
        The parts and the manifest, in the order written.
    """
    if part_bytes <= 0:
        raise ValueError(f"`part_bytes` must be > 0, got {part_bytes}")
    buffer = io.BytesIO()
    counts: dict[str, int] = {}
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, folder in dirs.items():
            counts[name] = 0
            if not folder.is_dir():
                continue
            for path in sorted(folder.rglob("*")):
                if path.is_file() and not _skipped(path.name):
                    tar.add(path, arcname=f"{name}/{path.relative_to(folder)}", recursive=False)
                    counts[name] += 1
    data = _xz(buffer.getvalue())
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("warmcache.part*"):
        old.unlink()
    parts = []
    for i in range(0, max(len(data), 1), part_bytes):
        path = out / f"warmcache.part{i // part_bytes:02d}"
        path.write_bytes(data[i : i + part_bytes])
        parts.append(path)
    manifest = {
        "key": dict(key),
        "files": counts,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "parts": [{"name": p.name, "sha256": _sha256(p)} for p in parts],
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return [*parts, out / MANIFEST]


def stage(src: Path, dirs: CacheDirs, here: Mapping[str, str]) -> dict[str, int]:
    """Check the pack in ``src`` against this machine's key and its checksums, then unpack it into ``dirs``.

    Nothing is written unless every check passes.

    Returns:
        The number of files unpacked per cache.

    Raises:
        KeyMismatch: the pack's key differs from ``here`` (every differing field named).
        FileNotFoundError: the manifest or a part is missing.
        ValueError: a part or the whole is not what the manifest recorded.
    """
    manifest_path = src / MANIFEST
    if not manifest_path.is_file():
        raise FileNotFoundError(f"no {MANIFEST} in {src}: copy every warmcache.part* file and {MANIFEST} there")
    manifest = json.loads(manifest_path.read_text())
    if problems := key_problems(manifest["key"], here):
        raise KeyMismatch(
            "the warm cache was built for another machine or other versions; rebuild it here with "
            "`python benchmarks/gpu/warm_cache.py build`. Differs: " + "; ".join(problems)
        )
    chunks = []
    for part in manifest["parts"]:
        path = src / part["name"]
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: the pack has {len(manifest['parts'])} parts")
        if _sha256(path) != part["sha256"]:
            raise ValueError(f"{path} is damaged or from another pack (its sha256 differs from {MANIFEST}'s)")
        chunks.append(path.read_bytes())
    data = b"".join(chunks)
    if hashlib.sha256(data).hexdigest() != manifest["sha256"]:
        raise ValueError(f"the parts in {src} do not join into the packed cache (sha256 differs)")
    targets = dict(dirs.items())
    counts = dict.fromkeys(targets, 0)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:xz") as tar:
        for member in tar.getmembers():
            name, _, rest = member.name.partition("/")
            if name not in targets or not member.isfile() or not rest or ".." in Path(rest).parts:
                raise ValueError(f"unexpected entry {member.name!r} in the pack")
        for member in tar.getmembers():
            name, _, rest = member.name.partition("/")
            target = targets[name] / rest
            target.parent.mkdir(parents=True, exist_ok=True)
            extracted = tar.extractfile(member)
            assert extracted is not None
            target.write_bytes(extracted.read())
            counts[name] += 1
    return counts


def _jobs(
    tasks: Sequence[str], num_envs: int, modes: str, mjlab_python: str | None, mjlab_path: str | None, peer: bool
) -> list[Job]:
    """One prewarm per task and model variant (ours on its own MJCF and on mjlab's file), and mjlab's if ``peer``."""
    jobs = []
    xml_dir = _mjlab_xmls(mjlab_python, mjlab_path) if mjlab_path else None
    clip = next(Path("gym_graphreset").rglob("g1_sway.npz"), None)
    bench = [sys.executable, "-m", "gym_graphreset", "bench", "--no-progress", "--num-envs", str(num_envs)]
    bench += ["--steps", "2", "--warmup", "3", "--modes", modes]
    for label in tasks:
        env_id, peer_task = TASKS[label]
        robot = label.split("-")[0]
        out = ["--out", f"/tmp/warm_cache/{label}"]
        jobs.append(Job(f"ours {label} x{num_envs}", [*bench, "--env-id", env_id, *out]))
        if xml_dir is None:
            continue
        kwargs = f"model_xml={xml_dir}/unitree_{robot}/xmls/{robot}.xml,keep_sensors=true"
        if label == "g1-tracking" and clip:
            kwargs += f",motion_file={clip.resolve()}"
        kwargs += ",forward_before_obs=true"  # mjlab's step runs a forward before the observations in every task
        variant = ["--variant", f"w:{kwargs}"]
        jobs.append(Job(f"ours {label} mjlab-work x{num_envs}", [*bench, "--env-id", env_id, *variant, *out]))
        if not peer:
            continue
        runner = ["gym_graphreset/bench/peers/mjlab_runner.py", "--num-envs", str(num_envs), "--steps", "2"]
        runner += ["--warmup", "2", "--device", "cuda:0", "--task", peer_task]
        if label == "g1-tracking" and clip:
            runner += ["--motion-file", str(clip.resolve())]
        jobs.append(Job(f"mjlab {label} x{num_envs}", [mjlab_python or "python3", *runner], {"PYTHONPATH": mjlab_path}))
    return jobs


def _mjlab_xmls(python: str | None, pythonpath: str) -> str | None:
    """mjlab's robot folder (``asset_zoo/robots``), found without importing mjlab here."""
    code = "import importlib.util as u, pathlib as p; s = u.find_spec('mjlab')\n"
    code += "print(p.Path(s.origin).parent if s else '')"
    env = {**os.environ, "PYTHONPATH": pythonpath}
    found = subprocess.run([python or "python3", "-c", code], capture_output=True, text=True, env=env, check=False)
    root = found.stdout.strip()
    return f"{root}/asset_zoo/robots" if root else None


@dataclass
class Job:
    """One prewarm process: a label, its command line, environment additions."""

    label: str
    argv: list[str]
    env: dict[str, str | None] | None = None


def _run_jobs(jobs: Sequence[Job], dirs: CacheDirs, deadline_s: float, log: Path) -> dict[str, str]:
    """Every job at once (each compiles on its own core), stopped at the deadline; each one's outcome."""
    base = {**os.environ, **dirs.env(), "PYTHONUNBUFFERED": "1", "MUJOCO_GL": "disable"}
    base |= {"IMAGEIO_FFMPEG_EXE": "/bin/true", "PYTHONPATH": os.environ.get("PYTHONPATH", ".")}
    log.parent.mkdir(parents=True, exist_ok=True)
    procs = []
    start = time.monotonic()
    with log.open("w") as sink:
        for job in jobs:
            env = {**base, **{k: v for k, v in (job.env or {}).items() if v is not None}}
            sink.write(f"== {job.label}: {' '.join(job.argv)}\n")
            sink.flush()
            procs.append((job, subprocess.Popen(job.argv, stdout=sink, stderr=subprocess.STDOUT, env=env)))
        outcome = {}
        for job, proc in procs:
            try:
                rc = proc.wait(timeout=max(1.0, deadline_s - (time.monotonic() - start)))
                outcome[job.label] = f"exit {rc} after {time.monotonic() - start:.0f} s"
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                outcome[job.label] = f"stopped at the {deadline_s:.0f} s deadline"
    return outcome


def first_step_seconds(env_id: str, num_envs: int, compile_step: bool, env_kwargs: Mapping[str, object]) -> float:
    """Seconds from building ``env_id`` to the end of its first captured (whole-step graph) step."""
    import gymnasium as gym
    import torch

    from gym_graphreset import FixedShapeAutoresetVectorEnv, StepConfig

    start = time.perf_counter()
    inner = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **env_kwargs)
    config = StepConfig.preset("step_graph", **({"compile": "inductor"} if compile_step else {}))
    env = FixedShapeAutoresetVectorEnv(inner, config)
    env.reset(seed=0)
    space = env.single_action_space
    shape = (num_envs, *(space.shape or ()))
    for _ in range(config.graph_warmup + 1):  # the eager warm-up steps, then the capture and its first replay
        env.step(torch.zeros(shape, device=env.device))
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    env.close()
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="compile the shipped tasks' kernels and steps, then pack both caches")
    build.add_argument("--out", type=Path, required=True, help="folder for the parts and the manifest")
    build.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of {list(TASKS)}")
    build.add_argument(
        "--prewarm-envs", type=int, default=64, help="envs of the first wave: warp's kernels, any size (default: 64)"
    )
    build.add_argument(
        "--num-envs", type=int, default=4096, help="envs of the second wave: Inductor's step, per size (0: none)"
    )
    build.add_argument("--deadline-s", type=float, default=540.0, help="both waves' time before packing (default: 540)")
    build.add_argument("--mjlab-pythonpath", default=None, help="PYTHONPATH with mjlab: prewarm its side too")
    build.add_argument("--mjlab-python", default="python3", help="the interpreter mjlab runs in (default: python3)")
    build.add_argument("--no-prewarm", action="store_true", help="pack the caches as they are")
    staging = sub.add_parser("stage", help="check a pack against this machine, then unpack it")
    staging.add_argument("src", type=Path, help="folder with warmcache.part* and warmcache.json")
    staging.add_argument("--root", type=Path, default=Path("/opt/ggcache"), help="where the caches go")
    first = sub.add_parser("first-step", help="seconds to each task's first captured step, in fresh processes")
    first.add_argument("--tasks", default="go1,g1,go1-rough", help="tasks timed with the step graph")
    first.add_argument("--compiled-tasks", default="go1", help="tasks timed with the compiled step graph too")
    first.add_argument("--num-envs", type=int, default=4096)
    first.add_argument("--out", type=Path, default=None, help="write the seconds as JSON here")
    sub.add_parser("key", help="print this machine's cache key")
    one = sub.add_parser("one-first-step", help=argparse.SUPPRESS)
    one.add_argument("env_id")
    one.add_argument("num_envs", type=int)
    one.add_argument("--compile", action="store_true")
    args = parser.parse_args(argv)

    if args.command == "key":
        print(json.dumps(machine_key()))
        return 0
    if args.command == "stage":
        dirs = CacheDirs.under(args.root)
        try:
            counts = stage(args.src, dirs, machine_key())
        except (KeyMismatch, FileNotFoundError, ValueError) as exc:
            print(f"warm_cache stage: {exc}", file=sys.stderr)
            return 2
        env_file = args.root / "env.sh"
        env_file.write_text("".join(f"export {k}={v}\n" for k, v in dirs.env().items()))
        print(f"warm cache staged: {counts['warp']} warp files, {counts['inductor']} Inductor files; . {env_file}")
        return 0
    if args.command == "one-first-step":
        print(json.dumps({"seconds": first_step_seconds(args.env_id, args.num_envs, args.compile, {})}))
        return 0
    if args.command == "first-step":
        times: dict[str, float | str] = {}
        runs = [(t, False) for t in args.tasks.split(",") if t]
        runs += [(t, True) for t in args.compiled_tasks.split(",") if t]
        unknown = sorted({t for t, _ in runs} - set(TASKS))
        if unknown:
            parser.error(f"unknown tasks {unknown}; choose from {list(TASKS)}")
        for label, compiled in runs:
            name = f"{label}{' compiled' if compiled else ''}"
            argv_one = [sys.executable, __file__, "one-first-step", TASKS[label][0], str(args.num_envs)]
            t0 = time.perf_counter()
            done = subprocess.run([*argv_one, *(["--compile"] if compiled else [])], capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if done.returncode == 0:
                inside = json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
                times[name] = round(wall, 1)
                print(f"{name}: first captured step {wall:.1f} s after the process started ({inside:.1f} s in the env)")
            else:
                times[name] = f"failed: {done.stderr.strip().splitlines()[-1:]}"
                print(f"{name}: failed\n{done.stderr[-2000:]}")
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"key": machine_key(), "num_envs": args.num_envs, "seconds": times}))
        return 0
    # build
    dirs = CacheDirs.from_env()
    unknown = sorted(set(args.tasks.split(",")) - set(TASKS))
    if unknown:
        parser.error(f"unknown --tasks {unknown}; choose from {list(TASKS)}")
    if not args.no_prewarm:
        # wave 1: every side's kernels at a small size (warp's kernels do not depend on the number of worlds);
        # wave 2: our compiled step at the size it will run (Inductor compiles one graph per shape)
        tasks, start = args.tasks.split(","), time.monotonic()
        waves = [
            (_jobs(tasks, args.prewarm_envs, "step graph", args.mjlab_python, args.mjlab_pythonpath, True), "1"),
            (_jobs(tasks, args.num_envs, "step graph+compile", args.mjlab_python, args.mjlab_pythonpath, False), "2"),
        ]
        for jobs, wave in waves if args.num_envs > 0 else waves[:1]:
            left = args.deadline_s - (time.monotonic() - start)
            if left < 30:
                print(f"wave {wave}: skipped, {left:.0f} s left of the deadline", flush=True)
                continue
            print(f"wave {wave}: {len(jobs)} jobs for up to {left:.0f} s into {dirs}", flush=True)
            for label, outcome in _run_jobs(jobs, dirs, left, args.out / f"warmcache-build-{wave}.log").items():
                print(f"  {label}: {outcome}", flush=True)
    written = pack(dirs, args.out, machine_key())
    manifest = json.loads((args.out / MANIFEST).read_text())
    print(f"packed {manifest['files']} files into {len(written) - 1} part(s), {manifest['bytes'] / 2**20:.1f} MiB")
    shutil.rmtree("/tmp/warm_cache", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
