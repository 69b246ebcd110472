"""The functional core: the API model, defaulting, validation, rendering,
status and upgrade lifecycle, and event decisions; pure, no I/O."""
