"""GPUs: ``resources.gpus`` reaches each library's device, or is refused by name where no GPU is.

Every installed worker is asked, through ``mosaic run CONFIG --set resources.gpus=1 --dry-run`` in a
MOSAIC_HOME of its own, in the worker's own environment: on a machine whose library sees no GPU (this
one, CI) the run is refused naming ``resources.gpus`` and no run folder is made. The check itself
(``mosaic.workerkit.devices``) is tested with counts, and the CUDA build variant of the worker
environments (``MOSAIC_TORCH_VARIANT=cuda``) is resolved from the package index, without downloading.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import EXAMPLES, run_cli
from mosaic.errors import ConfigError, UserError
from mosaic.host.discovery import discover_workers
from mosaic.host.environments.layout import envs_root
from mosaic.workerkit import devices

WORKERS = discover_workers()
TORCH_PIN = "torch==2.13.0"


# -- every worker, through `mosaic run --dry-run` ------------------------------------------
@pytest.fixture(scope="module")
def gpu_home(tmp_path_factory) -> Path:
    """A MOSAIC_HOME of its own whose envs/ are the built worker environments (a link: nothing is rebuilt)."""
    home = tmp_path_factory.mktemp("gpus") / "home"
    home.mkdir()
    built = envs_root()
    if built.is_dir():
        (home / "envs").symlink_to(built, target_is_directory=True)
    return home


def _example(name: str) -> Path | None:
    prefix = {"mosaic_llm": "llm"}.get(name, name)
    found = sorted(EXAMPLES.glob(f"{prefix}_*.json"))
    return found[0] if found else None


def _gpus_seen(python: str | None) -> int:
    """GPUs the worker's own interpreter sees (torch or JAX, whichever it has)."""
    code = ("from mosaic.workerkit.devices import gpu_count\n"
            "print(max(gpu_count('torch'), gpu_count('jax')))")
    proc = subprocess.run([python or sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", WORKERS.names())
def test_one_gpu_is_refused_by_name_where_the_worker_sees_none(name, gpu_home, tmp_path, request):
    worker = WORKERS.get(name)
    example = _example(name)
    if example is None:
        document = request.getfixturevalue("documents")[name]
        example = tmp_path / f"{name}.json"
        example.write_text(json.dumps({**document["default_config"], "worker": name}))
    honoured = _honours_gpus(request, name)
    seen = _gpus_seen(worker.python) if honoured else 0
    proc = run_cli("run", str(example), "--set", "resources.gpus=1", "--dry-run", home=gpu_home, timeout=600,
                   env={"OPENAI_API_KEY": "local", "RAY_AUTH_MODE": "disabled"})
    runs = gpu_home / "trainer" / "runs"
    assert not (runs.is_dir() and any(runs.iterdir())), sorted(runs.iterdir())  # no run folder, either way
    if seen:  # a GPU machine: the worker takes it (its dry run says so)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads(proc.stdout)["config"]["resources"]["gpus"] == 1
        return
    assert proc.returncode == 2, (proc.stdout[-1000:], proc.stderr[-2000:])
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("mosaic: error: resources.gpus: ") and "allowed: 0" in line, line
    if honoured:  # the library was asked, and said it sees none
        assert "sees no GPU on this machine" in line, line


def _honours_gpus(request, name: str) -> bool:
    return "resources.gpus" in request.getfixturevalue("documents")[name]["shared_fields"]["honoured"]


def test_the_gpu_workers_honour_the_field_and_the_others_refuse_it(documents):
    """Where each worker stands: the libraries with a GPU path map the field onto their device."""
    honoured = {name for name, doc in documents.items() if "resources.gpus" in doc["shared_fields"]["honoured"]}
    for name in ("cleanrl", "xuance", "tianshou", "jumanji", "ray", "benchmarl"):
        if name in documents:
            assert name in honoured, (name, documents[name]["shared_fields"]["refused"].get("resources.gpus"))
    for name in ("random", "mosaic_llm"):
        if name in documents:
            assert name not in honoured


# -- the check ------------------------------------------------------------------------------
def test_require_gpus_passes_what_fits_and_refuses_more_with_the_counts():
    devices.require_gpus(0, 0, "torch")  # nothing asked: nothing to see
    devices.require_gpus(1, 1, "torch")
    devices.require_gpus(0.5, 1, "torch")  # a share of one GPU
    devices.require_gpus(2, 4, "jax")
    with pytest.raises(ConfigError) as err:
        devices.require_gpus(1, 0, "torch")
    assert str(err.value) == "resources.gpus: 1 requested, but torch sees no GPU on this machine; allowed: 0"
    with pytest.raises(ConfigError) as err:
        devices.require_gpus(3, 2, "jax")
    assert str(err.value) == "resources.gpus: 3 requested, but jax sees only 2 GPUs on this machine; allowed: 0 to 2"
    with pytest.raises(ConfigError) as err:
        devices.require_gpus(2, 1, "torch")
    assert "sees only 1 GPU on" in str(err.value) and str(err.value).endswith("allowed: 0 to 1")
    with pytest.raises(ConfigError) as err:
        devices.require_gpus(1.5, 4, "torch")  # more than one GPU comes whole
    assert err.value.field == "resources.gpus" and "allowed: 0 to 1, or 2, 3" in str(err.value)
    with pytest.raises(ConfigError) as err:
        devices.require_gpus(2, 8, "XuanCe", max_gpus=1)  # a library with one device at most
    assert str(err.value).endswith("allowed: 0 to 1")


def test_gpu_count_asks_nothing_heavy_for_an_unknown_library_and_agrees_with_torch_here():
    assert devices.gpu_count("generic") == 0
    assert devices.check_gpus(0, "torch") == 0  # 0 requested: torch is not even asked
    import torch

    assert devices.gpu_count("torch") == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    assert devices.devices_used(0) == 0 and devices.devices_used(0.25) == 1 and devices.devices_used(3) == 3


def test_jax_told_to_use_the_cpu_sees_no_gpu(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert devices.gpu_count("jax") == 0


def test_rays_learners_follow_the_gpus_asked_for_on_a_cluster():
    """On a cluster (rllib.address) the GPUs are the nodes': one local learner on a share, one remote per GPU."""
    pytest.importorskip("ray_worker")
    from ray_worker.config import RayWorkerConfig

    def config(gpus):
        return RayWorkerConfig.from_dict({"run_id": "r", "resources": {"gpus": gpus},
                                          "rllib": {"address": "127.0.0.1:1"}})

    assert config(0.5).learner_resources() == {"num_learners": 0, "num_gpus_per_learner": 0.5}
    assert config(2).learner_resources() == {"num_learners": 2, "num_gpus_per_learner": 1}
    with pytest.raises(ConfigError) as err:
        config(1.5)
    assert err.value.field == "resources.gpus"


# -- CUDA builds of the worker environments, resolved without downloading ------------------
def _online() -> None:
    if os.environ.get("MOSAIC_OFFLINE") == "1":
        pytest.skip("resolving needs the package index pip is configured with (PyPI); MOSAIC_OFFLINE=1 is set")


def test_the_cuda_variant_resolves_a_cuda_torch_and_jax_for_jumanji(monkeypatch):
    _online()
    from mosaic.host.environments.build import resolve_requirements
    from mosaic.host.environments.sources import scan

    monkeypatch.delenv("MOSAIC_TORCH_VARIANT", raising=False)
    torch = resolve_requirements([TORCH_PIN], "cuda")
    assert torch["torch"] == "2.13.0"  # PyPI's plain wheel, not the +cpu one the sources also offer
    assert [name for name in torch if name.startswith("nvidia-")], torch
    jumanji = scan().sources.get("jumanji")
    if jumanji is None:
        return
    pins = [line for line in jumanji.requirements or () if line.replace(" ", "").startswith(("jax==", "jaxlib=="))]
    assert pins, jumanji.requirements
    jax = resolve_requirements(pins, "cuda")
    assert jax["jax-cuda12-plugin"] == jax["jax"] and jax["jaxlib"] == jax["jax"], jax
    assert [name for name in jax if name.startswith("nvidia-") and name.endswith("-cu12")], jax


def test_the_default_resolution_stays_cpu(monkeypatch):
    _online()
    from mosaic.host.environments.build import resolve_requirements
    from mosaic.host.environments.uv import torch_variant

    monkeypatch.delenv("MOSAIC_TORCH_VARIANT", raising=False)
    assert torch_variant() == "cpu"
    versions = resolve_requirements([TORCH_PIN])
    assert versions["torch"] == "2.13.0+cpu"
    assert not [name for name in versions if name.startswith("nvidia-")]
    monkeypatch.setenv("MOSAIC_TORCH_VARIANT", "rocm")
    with pytest.raises(UserError, match=r"^MOSAIC_TORCH_VARIANT: 'rocm' is not one of cpu, cuda$"):
        torch_variant()
