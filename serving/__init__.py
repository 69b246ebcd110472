"""What both programs' HTTP servers share: listeners that hostile clients cannot
exhaust, their limits, bind addresses, the health endpoints and /metrics behind
the API server's reviews."""
