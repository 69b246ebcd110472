"""What both programs' command lines share: flags from the environment, `--version`,
one-line configuration errors, the manifest reader of the offline commands, and
the structured log lines the programs write."""
