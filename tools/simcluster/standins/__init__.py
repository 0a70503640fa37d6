"""Stand-ins for the operators the Nova operator depends on, as small asyncio controllers.

Each writes what the real controller writes on the objects the Nova operator reads, and nothing
more (no StatefulSets, Services or databases behind them, unless a ``Backend`` of real servers is
given): one class per stand-in over one base (``base.StandIn``), all run by ``runner.StandIns``.

* ``mariadb``: mariadb-operator's MariaDB, Database, User and Grant.
* ``rabbitmq``: the RabbitMQ cluster operator's RabbitmqCluster and its default-user Secret.
* ``gateway``: a Gateway API controller for GatewayClasses, Gateways and HTTPRoutes.
* ``compute``: nova-compute and host discovery, on the fake Nova API.
* ``openstack``: the fake Keystone + Nova API itself (``FakeOpenStack``).
"""

from simcluster.standins.base import Backend, StandIn
from simcluster.standins.gateway import GATEWAY_CLASS, GATEWAY_CONTROLLER
from simcluster.standins.mariadb import MARIADB
from simcluster.standins.rabbitmq import RABBIT
from simcluster.standins.runner import StandIns

__all__ = ["GATEWAY_CLASS", "GATEWAY_CONTROLLER", "MARIADB", "RABBIT", "Backend", "StandIn", "StandIns"]
