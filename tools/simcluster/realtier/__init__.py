"""The real tier: ``launch`` (``launch_real``: the simulated cluster whose pods run on the kubelet
stand-in, beside the real servers), ``kubelet`` (the kubelet stand-in) and ``services`` (MariaDB,
RabbitMQ, memcached, Keystone, Placement, Glance as host processes)."""
