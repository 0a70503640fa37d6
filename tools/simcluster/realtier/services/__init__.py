"""The real backing services of the real-Nova tier, as plain host processes.

MariaDB, RabbitMQ and memcached come from Debian's packages (``tools/realnova/install.sh``); each
class here starts its server in a work directory of its own, on an address and port the caller
chooses, and offers the commands the operators that manage them in a real cluster would run
(databases, users and grants; broker users). Nothing here imports the operator.
"""
