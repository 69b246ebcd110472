"""Build images as OCI tarballs: `python -m hack.image build {operator,standin,pause}`.

The last line printed is the tarball's path; import it with
`ctr -n k8s.io images import <path>`. Progress and sizes go to stderr.
"""

import argparse
import sys
import time

from hack.image.images import RECIPES, build, tarball_path
from hack.image.oci import read_image, unpacked_size

MB = 1_000_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.image", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser("build", help="build one image (cached by its inputs)")
    build_parser.add_argument("image", choices=sorted(RECIPES))
    build_parser.add_argument(
        "--sizes", action="store_true", help="report the sizes of a cached image too"
    )
    build_parser.add_argument(
        "--name",
        action="append",
        default=[],
        metavar="REPOSITORY:TAG",
        help="name the image this way instead of its defaults (repeatable)",
    )
    args = parser.parse_args(argv)

    started = time.monotonic()
    cached = tarball_path(args.image, args.name).exists()
    tarball = build(args.image, args.name)
    names = ", ".join(read_image(tarball).names)
    if cached and not args.sizes:
        print(f"{args.image}: {names} (cached)", file=sys.stderr)
    else:
        print(
            f"{args.image}: {names}; {tarball.stat().st_size / MB:.1f} MB archive, "
            f"{unpacked_size(tarball) / MB:.1f} MB unpacked "
            f"({'cached' if cached else f'built in {time.monotonic() - started:.1f} s'})",
            file=sys.stderr,
        )
    print(tarball)
    return 0


if __name__ == "__main__":
    sys.exit(main())
