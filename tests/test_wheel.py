"""The built wheel works without the source tree: `demo` from a fresh virtual environment.

The wheel is built from this checkout and installed (without dependencies) into a new
venv under the test's temporary folder. Its dependencies are borrowed from the test
environment through a ``.pth`` line, which appends that environment's site-packages
after the venv's own (and ``JUPYTER_PATH`` names its jupyter data files): retrieval_lib
itself can only come from the wheel (the checkout's editable-install hook lives in a
``.pth`` file there, which a ``.pth`` line does not run). ``.ci/smoke`` installs the same wheel with its dependencies from the package
registry on Python 3.10 and 3.13.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    # nbconvert's templates and the kernel specs are data files of the borrowed packages,
    # under the test environment's share/jupyter rather than its site-packages
    env["JUPYTER_PATH"] = str(Path(sys.prefix) / "share" / "jupyter")
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w", str(out)], out)
    (built,) = out.glob("retrieval_lib-*.whl")
    return built


def test_wheel_ships_every_notebook_parameter_file_and_example(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = "retrieval_lib/bundled"
    for pattern, folder in (("notebooks/*.ipynb", "notebooks"), ("params/*.yaml", "params")):
        expected = {f"{shipped}/{folder}/{p.name}" for p in REPO.glob(pattern)}
        assert expected and expected <= names
    examples = {
        f"{shipped}/examples/{p.relative_to(REPO / 'examples').as_posix()}"
        for sub in ("runs", "benchmarks")
        for p in (REPO / "examples" / sub).rglob("*")
        if p.is_file()
    }
    assert examples <= names
    assert f"{shipped}/examples/synth_manifest.json" in names
    assert not any(n.startswith(f"{shipped}/examples/kb/") for n in names)


def test_demo_runs_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    _run([*pip, "install", "-q", "--no-deps", str(wheel)], tmp_path)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(_run([str(python), "-c", purelib], tmp_path).stdout.strip())
    (site / "test_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    where = _run(
        [str(python), "-c", "import retrieval_lib; print(retrieval_lib.__file__)"], tmp_path
    )
    assert Path(where.stdout.strip()).resolve().is_relative_to(venv.resolve())

    _run([str(venv / "bin" / "retrieval-lib"), "demo", "--out", "reports"], tmp_path)
    manifest = json.loads((REPO / "examples" / "synth_manifest.json").read_text(encoding="utf-8"))
    runs = {trial["run_id"] for trial in manifest["trials"]}
    reports = {p.parent.name for p in (tmp_path / "reports").glob("*/run_analysis.html")}
    assert runs and reports == runs
    for html in (tmp_path / "reports").glob("*/run_analysis.html"):
        assert "<html" in html.read_text(encoding="utf-8")[:2000].lower()
