"""The built wheel, installed into a fresh virtualenv, adds one top-level package of
its own (trussium_operator) and no generic module such as `common` or `webhook`,
and both programs run from it (ADR 0023).

No index is used: the wheel is built from the project's environment and installed
without dependencies; they come from this environment's site-packages, appended
to the fresh one's path (an appended path cannot hide what the wheel installed).
"""

import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION = (ROOT / "VERSION").read_text().strip()
STEP_TIMEOUT_SECONDS = 300


def _run(*argv: str | Path, env: dict[str, str] | None = None) -> str:
    return subprocess.run(
        [str(a) for a in argv],
        check=True,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_SECONDS,
        env=env,
    ).stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    """(the fresh environment, the top-level names the wheel added to its site-packages)."""
    work = tmp_path_factory.mktemp("wheel")
    _run(sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", work, ROOT)
    (wheel,) = work.glob(f"trussium_operator-{VERSION}-*.whl")
    env_dir = work / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(
        _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip()
    )
    before = {p.name for p in site.iterdir()}
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
         "--no-index", wheel)  # fmt: skip
    return env_dir, {p.name for p in site.iterdir()} - before


def test_the_wheel_adds_one_package_of_its_own(installed: tuple[Path, set[str]]) -> None:
    _, added = installed
    assert added == {"trussium_operator", f"trussium_operator-{VERSION}.dist-info"}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("trussium-webhook", "--version"), f"trussium-webhook {VERSION}"),
        (("trussium-webhook", "validate", "examples/runtime.yaml"), ""),
        (("trussium-controller", "render", "-f", "examples/runtime.yaml"), "kind: Deployment"),
    ],
)
def test_the_programs_run_from_it(
    installed: tuple[Path, set[str]], argv: tuple[str, ...], expected: str
) -> None:
    """The console scripts of the fresh environment, importing the wheel's package (its
    dependencies from this environment's site-packages, through PYTHONPATH)."""
    env_dir, _ = installed
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": sysconfig.get_path("purelib")}
    python = env_dir / "bin" / "python"
    # -P: the working directory (the repository, with its own trussium_operator) not first.
    probe = "import trussium_operator; print(trussium_operator.__file__)"
    where = _run(python, "-P", "-c", probe, env=env)
    assert where.startswith(str(env_dir)), where
    program, *args = argv
    out = subprocess.run(
        [str(env_dir / "bin" / program), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_SECONDS,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert expected in out.stdout
