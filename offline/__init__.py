"""The offline tool: `trussium-webhook validate` and `trussium-controller render`.

Reads manifests as the API server would (`manifests`, `inputs`), judges each with
the webhook's own rules (`checks`), and prints the verdicts (`validate`) or the
objects the controller would apply (`render`), with no cluster needed."""
