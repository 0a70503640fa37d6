"""Kubernetes operator for the OpenStack Nova compute control plane."""

__version__ = "0.1.0"
