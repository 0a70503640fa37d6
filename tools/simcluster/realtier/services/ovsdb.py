"""A real ``ovsdb-server`` (Debian's Open vSwitch) per compute node, for the pool's wait-for-chassis.

Its database has the ``Open_vSwitch`` schema and one row whose ``external_ids:system-id`` names the
node, as an OVN chassis would set it; the socket is where the pool's hostPath puts
``/run/openvswitch/db.sock``. The socket is made connectable by any user: the node prerequisite the
docs state for the init container, which runs as the nova user. A socket path longer than
``sun_path`` allows is fine: Open vSwitch reaches it through ``/proc/self/fd/<dir>/<name>``.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

from simcluster.realtier.services.procs import ServerProcess, ServiceError, run, wait_until

SCHEMA = pathlib.Path("/usr/share/openvswitch/vswitch.ovsschema")


@dataclass
class OvsdbServer(ServerProcess):
    socket: pathlib.Path = pathlib.Path("/run/openvswitch/db.sock")
    system_id: str = ""

    def start(self) -> OvsdbServer:
        if not SCHEMA.exists():
            raise ServiceError("ovsdb-server is not installed (Debian package openvswitch-switch)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        db = self.workdir / "conf.db"
        if not db.exists():
            run(["ovsdb-tool", "create", str(db), str(SCHEMA)])
        self._child = self._spawner.spawn(
            "ovsdb-server",
            [
                "ovsdb-server",
                str(db),
                f"--remote=punix:{self.socket}",
                f"--unixctl={self.workdir / 'ovsdb-server.ctl'}",
                f"--pidfile={self.workdir / 'ovsdb-server.pid'}",
                "--no-chdir",
                f"--log-file={self.workdir / 'ovsdb-server.log'}",
            ],
        )
        wait_until(self.socket.exists, self._child, what="ovsdb-server", timeout=20)
        vsctl = ["ovs-vsctl", f"--db=unix:{self.socket}", "--no-wait", "--timeout=10"]
        run([*vsctl, "init"])
        if self.system_id:
            run([*vsctl, "set", "Open_vSwitch", ".", f"external_ids:system-id={self.system_id}"])
        self.socket.chmod(0o666)
        return self

    def system_id_set(self) -> str:
        out = run(
            [
                "ovs-vsctl",
                f"--db=unix:{self.socket}",
                "--no-wait",
                "get",
                "Open_vSwitch",
                ".",
                "external_ids:system-id",
            ]
        )
        return out.strip().strip('"')
