"""A forced watch expiry on a live API server: the controller's connections are cut
while a managed ConfigMap is changed and etcd compacted, so its watch resumes from a
version that no longer exists, gets 410 Gone, and relists after a backoff."""

import json
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import audit_entries, now, scoped, wait_for
from tests.faults.proxy import Relay
from tests.faults.rollout import apply_runtimes, wait_converged
from tests.faults.supervisor import Supervised

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
RUNTIMES = 10


def test_a_watch_expired_by_etcd_compaction_relists_and_loses_nothing(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    relay = Relay(int(urlsplit(plane.server).port or 443)).start()
    kubeconfig = relay.kubeconfig(plane.kubeconfig, tmp_path / "relayed.kubeconfig")
    log = tmp_path / "controller.log"
    controller = Supervised(
        plane, log, *scoped(namespace), f"--kubeconfig={kubeconfig}", identity="a"
    )
    try:
        controller.controller.wait_ready()
        wanted = apply_runtimes(plane, namespace, RUNTIMES, "1.0.0")
        wait_converged(plane, namespace, wanted, "1.0.0")

        since = now()
        relay.refusing.set()
        relay.cut()
        # Changes the controller cannot see now: drift in a managed ConfigMap, then
        # another write, so etcd's revision moves past the watch's resume point...
        drift = {"data": {"TRUSSIUM_ENVIRONMENT": "dev"}}
        plane.kubectl("patch", "configmap", wanted[0], "-n", namespace, "--type=merge",
                      "-p", json.dumps(drift))  # fmt: skip
        plane.kubectl("create", "configmap", "unmanaged", "-n", namespace)
        # ...and its history compacted away, so the resumed watch gets 410 Gone.
        plane.compact_etcd()
        relay.refusing.clear()
        healed_at = time.monotonic()

        wait_for(lambda: '"watch expired"' in log.read_text(), "a 410 seen by the controller")
        seconds, report = wait_converged(plane, namespace, wanted, "1.0.0")
        assert controller.exits == [], "the controller survived the expiry"
        lists = [
            e
            for e in audit_entries(plane, since)
            if e.get("verb") == "list" and e.get("objectRef", {}).get("resource") == "configmaps"
        ]
        # One relist after the 410 (a storm would be one every few milliseconds).
        assert 1 <= len(lists) <= 3, [e.get("requestReceivedTimestamp") for e in lists]
        print(
            f"\nFAULT-RESULT watch-expiry-410: converged in {seconds:.1f}s "
            f"(drift restored {time.monotonic() - healed_at:.1f}s after the network healed); "
            f"{report.summary()} runtimes={RUNTIMES} configmapLists={len(lists)}"
        )
    finally:
        controller.stop()
        relay.close()
