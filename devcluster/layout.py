"""Where each file of one control plane lives, and which loopback ports it uses."""

import socket
from dataclasses import dataclass, fields
from pathlib import Path

HOST = "127.0.0.1"


def free_port() -> int:
    """A loopback port free right now, for one extra listener (a webhook, a controller)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int

    @classmethod
    def allocate(cls) -> "Ports":
        """Distinct free ports: every socket stays bound until all are chosen."""
        sockets = []
        try:
            for _ in fields(cls):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.bind((HOST, 0))
                sockets.append(sock)
            return cls(*(sock.getsockname()[1] for sock in sockets))
        finally:
            for sock in sockets:
                sock.close()


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    def kubeconfig(self, name: str) -> Path:
        return self.root / f"{name}.kubeconfig"

    @property
    def audit_policy(self) -> Path:
        return self.root / "audit-policy.yaml"

    @property
    def audit_log(self) -> Path:
        return self.logs / "audit.log"

    @property
    def tool_home(self) -> Path:
        """HOME-like state of kubectl and helm (caches), kept out of the user's home."""
        return self.root / "home"

    def log(self, component: str) -> Path:
        return self.logs / f"{component}.log"
