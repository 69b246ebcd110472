"""Container images built here, without a Docker engine or a registry.

Three images, each written as an OCI image-layout tarball that
`ctr -n k8s.io images import` loads under the names the tests use:

- `operator`: the Dockerfile's image (both programs), from a Debian rootfs
  made by mmdebstrap plus the project's wheels from PyPI;
- `standin`: a tiny stand-in for the Trussium runtime (`standin/main.go`);
- `pause`: the pod sandbox process kubelet needs (`pause/main.go`).

    python -m hack.image build standin   # last line: the tarball's path

Results are cached by the hash of their inputs, so a second run is instant.
ADR 0010 records the choices.
"""
