"""Shared helpers of the tests beside this module (not a test module)."""

from __future__ import annotations

from simcluster import ControlPlane


def restart_apiserver_here(plane: ControlPlane) -> None:
    """Start kube-apiserver from this (the main) thread, blocking the loop for a few seconds.

    The control plane ties each process to the thread that started it (parent-death
    signal), so starting it from a worker thread would kill it when that thread ends.
    """
    plane.start_apiserver()
