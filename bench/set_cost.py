"""A bundle set's size and first-boot cost (issue 44), for `bench.py`.

Two fake nodes of tests/detect_trees.py (the DGX H100 tree with its NICs' drivers bound, and the
L4 PCIe tree) give two hardware files (`gen detect --root`); `gen set` makes their training set.
Printed: the files and bytes the set lists and what it stores (identical files hard-linked, as
`du` counts them), the image build (`install.sh --image-build --root`), and the selector on a
fresh fake DGX node: the first boot (judge both members, install the DGX one) and a later boot
(publish the kept choice), each the median wall time of a few runs. systemctl is a stub; the
member is installed as an image build into the fake node (TEST_SYSROOT), which is what a first
boot's install writes without the activation steps.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import yaml  # noqa: E402
from boot_forks import dgx_node  # noqa: E402  (the DGX tree its boot-script counts use)

from tests import detect_trees  # noqa: E402

GEN = [sys.executable, "-m", "generator"]
RUNS = 3


def gen(*args: str, cwd: Path) -> str:
    result = subprocess.run([*GEN, *args], capture_output=True, text=True, check=True, cwd=cwd)
    return result.stdout


def timed(command: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(command, capture_output=True, check=True, env=env)
    return time.perf_counter() - start


def stored_bytes(directory: Path) -> int:
    """Bytes of the regular files below ``directory``, each inode once (as du counts)."""
    seen: dict[tuple[int, int], int] = {}
    for path in directory.rglob("*"):
        if path.is_file() and not path.is_symlink():
            info = path.stat()
            seen[(info.st_dev, info.st_ino)] = info.st_size
    return sum(seen.values())


def measure(scratch: Path) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    os.environ.update(env)
    hardware = []
    for name, tree in (
        ("dgx", dgx_node(scratch / "dgx-tree")),
        ("l4", detect_trees.l4_pcie().build(scratch / "l4-tree")),
    ):
        described = yaml.safe_load(gen("detect", "--root", str(tree), cwd=REPO))
        described["name"] = name
        (scratch / f"{name}.yaml").write_text(yaml.safe_dump(described))
        hardware += ["--hw", str(scratch / f"{name}.yaml")]
    set_dir = scratch / "set"
    gen("set", *hardware, "--profile", "training", "-o", str(set_dir), cwd=REPO)
    listed = sum(p.stat().st_size for p in set_dir.rglob("*") if p.is_file())
    builds, firsts, laters = [], [], []
    stubs = scratch / "bin"
    stubs.mkdir()
    (stubs / "systemctl").write_text("#!/bin/sh\nexit 0\n")
    (stubs / "systemctl").chmod(0o755)
    for run in range(RUNS):
        image = scratch / f"image{run}"
        image.mkdir()
        builds.append(
            timed(["sh", str(set_dir / "install.sh"), "--image-build", "--root", str(image)])
        )
        node = dgx_node(scratch / f"node{run}")
        select = [
            "sh",
            str(image / "usr/local/libexec/goldtune/select"),
            str(image / "usr/local/lib/goldtune/set"),
        ]
        node_env = dict(env, TEST_SYSROOT=str(node), PATH=f"{stubs}:{env['PATH']}")
        firsts.append(timed(select, node_env))
        laters.append(timed(select, node_env))
    return [
        "bundle set: two members (fake DGX H100 and L4 nodes), profile training",
        f"  set size: {listed} bytes listed, {stored_bytes(set_dir)} stored "
        "(identical files hard-linked)",
        f"  image build (install.sh --image-build --root): {statistics.median(builds):.2f} s",
        f"  first boot, selector on a fake DGX node (judge 2, install 1): "
        f"{statistics.median(firsts):.2f} s",
        f"  later boot (publish the kept choice): {statistics.median(laters):.3f} s",
    ]


def run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="goldtune-set-cost-") as scratch:
        try:
            return measure(Path(scratch))
        except subprocess.CalledProcessError as error:
            return [f"bundle set: failed: {error}"]
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    print("\n".join(run()))
