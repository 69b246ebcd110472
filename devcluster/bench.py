"""`python -m devcluster.bench`: median startup time of each profile (until
ready to use, as the fixtures see it), for the project's closing note."""

import argparse
import statistics
import time

from devcluster.components import locate, locate_node
from devcluster.controlplane import ControlPlane, Profile
from devcluster.node import unsupported_reason


def startup_seconds(profile: Profile) -> float:
    began = time.monotonic()
    with ControlPlane(profile):
        return time.monotonic() - began


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m devcluster.bench", description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    locate()  # a first build must not count as startup time
    for profile in Profile:
        if profile is Profile.NODE:
            if (reason := unsupported_reason()) is not None:
                print(f"{profile}: skipped ({reason})")
                continue
            locate_node()
        runs = [startup_seconds(profile) for _ in range(args.runs)]
        shown = ", ".join(f"{r:.1f}" for r in runs)
        print(f"{profile}: median {statistics.median(runs):.1f}s over {args.runs} runs ({shown})")


if __name__ == "__main__":
    main()
