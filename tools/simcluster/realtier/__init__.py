"""The real-Nova tier: ``all_real`` (``launch_all_real``: the simulated control plane with every node
a real kubelet on containerd, ``tools/realnode``, and the real servers on the host's loopback),
``tier`` (``RealTier``, the handle's ``real``), ``operator_chart`` (the operator installed by its
chart) and ``services`` (MariaDB, RabbitMQ, memcached, Keystone, Placement, Glance as host
processes)."""
