"""A TCP relay between a client and the API server that can cut every connection.

TLS passes through untouched (the serving certificate names 127.0.0.1, whatever
the port), so the client talks to the real API server; the test decides when
the network fails: `cut()` drops every open connection, and while `refusing`
new ones are closed as soon as they arrive.
"""

import contextlib
import socket
import threading
from pathlib import Path
from typing import Self

import yaml

HOST = "127.0.0.1"
CHUNK = 64 * 1024


class Relay:
    def __init__(self, upstream_port: int) -> None:
        self._upstream = (HOST, upstream_port)
        self._listener = socket.create_server((HOST, 0))
        self.port: int = self._listener.getsockname()[1]
        self.refusing = threading.Event()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> Self:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def retarget(self, upstream_port: int) -> None:
        """Send new connections to another port; open ones stay where they are (as when
        a Service's endpoints change)."""
        self._upstream = (HOST, upstream_port)

    def cut(self) -> None:
        """Drop every open connection at once (both directions)."""
        with self._lock:
            sockets, self._open = self._open, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()

    def kubeconfig(self, source: Path, target: Path) -> Path:
        """`source` with its server pointed at this relay."""
        config = yaml.safe_load(source.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = f"https://{HOST}:{self.port}"
        target.write_text(yaml.safe_dump(config))
        return target

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.refusing.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self._upstream, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            # Forward each write at once, as kube-proxy's NAT does: with Nagle's
            # algorithm a body written after its head waited ~40 ms for an ACK.
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._open.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(CHUNK):
                sink.sendall(data)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
