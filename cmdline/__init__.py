"""The command-line shell both programs share: flags from the environment,
`--version`, one-line configuration errors, the structured log lines, where the
API server and credentials are found, metadata-only Accept headers and stopping
on a signal."""
