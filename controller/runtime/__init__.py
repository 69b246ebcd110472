"""The reconcile of a TrussiumRuntime: its managed kinds, watches, apply steps,
drift, ownership, status, events and the referenced Secrets' presence."""
