"""`python -m devcluster up --profile api|cluster|node`: a control plane in the
foreground until Ctrl-C, then nothing left behind."""

import argparse
import sys
import time

from devcluster.components import ComponentsError
from devcluster.controlplane import ControlPlane, Profile, StartupError
from devcluster.node import NodeError

WATCH_SECONDS = 1.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m devcluster", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start a local control plane until Ctrl-C")
    up.add_argument("--profile", choices=[p.value for p in Profile], default=Profile.CLUSTER.value)
    up.add_argument(
        "--nodes", type=int, default=None, help="kwok nodes (default: 3 in cluster, 0 in node)"
    )
    up.add_argument(
        "--keep-dir", action="store_true", help="keep certificates, kubeconfig and logs on exit"
    )
    return parser


def up(plane: ControlPlane) -> int:
    began = time.monotonic()
    with plane:
        print(f"devcluster: {plane.profile} profile ready in {time.monotonic() - began:.1f}s")
        print(f"  server:     {plane.server}")
        print(f"  kubeconfig: {plane.kubeconfig}")
        print(f"  bin dir:    {plane.bin_dir}")
        print(f"  logs:       {plane.log_dir}")
        print(f"  audit log:  {plane.audit_log}")
        print("  pids:       " + " ".join(f"{name}={pid}" for name, pid in plane.pids.items()))
        print(f"export KUBECONFIG={plane.kubeconfig} PATH={plane.bin_dir}:$PATH")
        try:
            # Inside the try: a Ctrl-C right after the prompt is a stop too, not an error.
            print("Press Ctrl-C to stop.", flush=True)
            while (exited := plane.exited_component()) is None:
                time.sleep(WATCH_SECONDS)
        except KeyboardInterrupt:
            print("\ndevcluster: stopping", flush=True)
            return 0
        print(f"devcluster: {exited.describe_exit(40)}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        plane = ControlPlane(args.profile, nodes=args.nodes, keep_dir=args.keep_dir)
        return up(plane)
    except (ComponentsError, NodeError, StartupError, ValueError) as error:
        print(f"devcluster: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
