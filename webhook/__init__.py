"""The admission webhook: HTTPS admission server, offline validator and CLI."""
