"""Taking over from the Go operator: never reconciling beside it (`exclusion`)
and moving its objects to this operator without a restart (`takeover`)."""
