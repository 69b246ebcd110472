"""The controller: `runtime` reconciles TrussiumRuntimes, `migration` takes over
from the Go operator, `webhook_certificates` keeps the webhook's certificates, on
the generic `machinery`; `manager` wires them, `cli` starts them."""
