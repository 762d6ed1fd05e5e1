"""The warm GPU cache kit (``benchmarks/gpu/warm_cache.py``): a packed cache unpacks to the same files; a pack
built for other versions or another GPU, a missing or damaged part, and a hostile archive entry are refused
before anything is written."""

from __future__ import annotations

import importlib.util
import io
import json
import re
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "warm_cache.py"
KEY = {"warp": "1.19.0", "torch": "2.11.0+cu130", "triton": "3.6.0", "cuda": "13.0", "arch": "sm_90", "python": "3.12"}


@pytest.fixture(scope="module")
def wc() -> ModuleType:
    spec = importlib.util.spec_from_file_location("warm_cache_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def caches(tmp_path: Path, wc: ModuleType) -> object:
    """A small warp cache (a binary, its metadata, a generated source) and an Inductor cache."""
    dirs = wc.CacheDirs.under(tmp_path / "built")
    module = dirs.warp / "1.19.0" / "wp_mod_abc1234"
    module.mkdir(parents=True)
    (module / "wp_mod_abc1234.sm90.cubin").write_bytes(bytes(range(256)) * 64)
    (module / "wp_mod_abc1234.meta").write_text('{"k": 1}')
    (module / "wp_mod_abc1234.cu").write_text("// generated source")
    (dirs.inductor / "fxgraph" / "ab").mkdir(parents=True)
    (dirs.inductor / "fxgraph" / "ab" / "entry").write_bytes(b"graph" * 100)
    (dirs.inductor / "triton" / "0").mkdir(parents=True)
    (dirs.inductor / "triton" / "0" / "kernel.cubin").write_bytes(b"k" * 3000)
    return dirs


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("part_bytes", [64, 10**6])
def test_a_staged_pack_holds_every_file_a_warm_start_reads(
    wc: ModuleType, caches: object, tmp_path: Path, part_bytes: int
) -> None:
    """Binaries, metadata and Inductor's entries come back byte for byte, over one part or many; warp's generated
    sources (not read when the binary exists) are left out."""
    written = wc.pack(caches, tmp_path / "pack", KEY, part_bytes=part_bytes)
    parts = [p for p in written if p.name.startswith("warmcache.part")]
    assert (len(parts) > 1) == (part_bytes == 64)
    assert all(p.stat().st_size <= part_bytes for p in parts)
    staged = wc.CacheDirs.under(tmp_path / "fresh")
    counts = wc.stage(tmp_path / "pack", staged, KEY)
    assert counts == {"warp": 2, "inductor": 2}
    expected = {k: v for k, v in _files(caches.warp).items() if not k.endswith(".cu")}
    assert _files(staged.warp) == expected
    assert _files(staged.inductor) == _files(caches.inductor)


@pytest.mark.parametrize("field", ["warp", "torch", "triton", "cuda", "arch", "python"])
def test_a_pack_for_another_machine_is_refused_naming_the_field(
    wc: ModuleType, caches: object, tmp_path: Path, field: str
) -> None:
    """A key that differs in any field is refused, naming the field with both values, and nothing is written."""
    wc.pack(caches, tmp_path / "pack", KEY)
    here = {**KEY, field: "other"}
    target = tmp_path / "fresh"
    with pytest.raises(wc.KeyMismatch, match=re.escape(f"{field}: pack '{KEY[field]}', this machine 'other'")):
        wc.stage(tmp_path / "pack", wc.CacheDirs.under(target), here)
    assert not target.exists()


def test_a_missing_or_damaged_part_is_refused_before_writing(wc: ModuleType, caches: object, tmp_path: Path) -> None:
    """A part deleted, or a part whose bytes changed, is named; no cache file is written."""
    wc.pack(caches, tmp_path / "pack", KEY, part_bytes=512)
    target = tmp_path / "fresh"
    part = tmp_path / "pack" / "warmcache.part01"
    data = part.read_bytes()
    part.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ValueError, match="warmcache.part01 is damaged"):
        wc.stage(tmp_path / "pack", wc.CacheDirs.under(target), KEY)
    part.unlink()
    with pytest.raises(FileNotFoundError, match="warmcache.part01 is missing"):
        wc.stage(tmp_path / "pack", wc.CacheDirs.under(target), KEY)
    with pytest.raises(FileNotFoundError, match="no warmcache.json"):
        wc.stage(tmp_path / "empty", wc.CacheDirs.under(target), KEY)
    assert not target.exists()


def test_an_entry_outside_the_two_caches_is_refused(wc: ModuleType, tmp_path: Path) -> None:
    """A pack whose archive writes outside the cache folders (``..``) or names another folder is refused."""
    for name in ("warp/../../escape", "elsewhere/file"):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        pack = tmp_path / "pack"
        pack.mkdir(exist_ok=True)
        data = buffer.getvalue()
        (pack / "warmcache.part00").write_bytes(data)
        digest = wc._sha256(pack / "warmcache.part00")
        manifest = {"key": KEY, "sha256": digest, "parts": [{"name": "warmcache.part00", "sha256": digest}]}
        (pack / "warmcache.json").write_text(json.dumps(manifest))
        with pytest.raises(ValueError, match="unexpected entry"):
            wc.stage(pack, wc.CacheDirs.under(tmp_path / "fresh"), KEY)
        assert not (tmp_path / "fresh").exists() and not (tmp_path / "escape").exists()


def test_stage_exits_with_status_2_and_a_message(
    wc: ModuleType, caches: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the command line a refused pack is one message on stderr and exit status 2, not a traceback."""
    wc.pack(caches, tmp_path / "pack", {**KEY, "arch": "sm_00"})
    assert wc.main(["stage", str(tmp_path / "pack"), "--root", str(tmp_path / "fresh")]) == 2
    assert "arch: pack 'sm_00', this machine" in capsys.readouterr().err


def test_build_jobs_cover_every_task_at_the_size_asked(wc: ModuleType) -> None:
    """Without mjlab, one prewarm per task on our own model, each at the size and in the mode asked for."""
    jobs = wc._jobs(list(wc.TASKS), 64, "step graph", None, None, True)
    assert [j.label for j in jobs] == [f"ours {t} x64" for t in wc.TASKS]
    for job, (env_id, _) in zip(jobs, wc.TASKS.values(), strict=True):
        argv = job.argv
        assert argv[argv.index("--env-id") + 1] == env_id
        assert argv[argv.index("--num-envs") + 1] == "64" and argv[argv.index("--modes") + 1] == "step graph"
