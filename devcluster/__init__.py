"""A local Kubernetes control plane (etcd, kube-apiserver, and in the cluster
profile kube-controller-manager, kube-scheduler and kwok) for tests and demos."""

from devcluster.controlplane import CommandError, ControlPlane, Profile, StartupError

__all__ = ["CommandError", "ControlPlane", "Profile", "StartupError"]
