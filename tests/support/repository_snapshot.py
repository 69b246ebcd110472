"""This repository as a tool that installs it sees it: a git repository with one commit.

pre-commit clones a hook's repository at a commit, and a GitHub Action runs
from a checkout of its ref. The snapshot holds the files of the working tree
(tracked ones and new ones git does not ignore, as they are now), so the
tests install what is about to be committed, not the last commit.
"""

import shutil
import subprocess
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), **GIT_IDENTITY},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stdout.strip()


def snapshot(target: Path) -> str:
    """Commit the working tree's files into a new repository at `target`; its commit."""
    listed = git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    target.mkdir(parents=True)
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        copy = target / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            copy.symlink_to(source.readlink())
        else:
            shutil.copy2(source, copy)
    git(target, "init", "-q")
    git(target, "add", "-A")
    git(target, "commit", "-q", "-m", "snapshot")
    return git(target, "rev-parse", "HEAD")


def installed_dependencies() -> dict[str, str]:
    """Environment for pip that installs the package alone, without an index, and lets it
    import its dependencies from the test's own environment (docs/adr/0041): a full install
    from PyPI takes minutes on a busy machine."""
    return {
        "PYTHONPATH": sysconfig.get_paths()["purelib"],
        "PIP_NO_DEPS": "1",
        "PIP_NO_BUILD_ISOLATION": "0",  # pip reads it inverted: 0 turns isolation off
        "PIP_NO_INDEX": "1",
        "PIP_NO_COMPILE": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
