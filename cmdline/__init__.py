"""What both programs' command lines share: flags from the environment, `--version`,
one-line configuration errors, and the manifest reader of the offline commands."""
