"""The tools' own Kubernetes clients: ``kube`` (blocking, for setup and tests), ``asynckube`` (for
the stand-in controllers), ``watchcache`` (list, watch and work queues) and
``jsonlog`` (reading the operator's JSON log lines)."""
