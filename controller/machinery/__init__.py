"""The generic controller machinery: nothing here knows about TrussiumRuntimes."""
