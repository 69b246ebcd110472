"""The shell both programs share: flags from the environment, `--version`, one-line
configuration errors, the manifest reader of the offline commands, the structured
log lines and their setup, and for the servers bind addresses, health and metrics
endpoints, the API client, metadata-only Accept headers and stopping on a signal."""
