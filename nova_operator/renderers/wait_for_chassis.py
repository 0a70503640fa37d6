"""The pool's wait-for-chassis init container: its script, run by the image's python3.

nova-compute must not start before the node's OVN chassis is registered (``external_ids:system-id``
in the Open_vSwitch table). The image has no ovsdb-client, so the script speaks OVSDB JSON-RPC over
the node's socket, and while it waits it prints why, in words a node owner can act on: the socket
is missing, refused, or not open to the pod's user, or the row has no system-id yet.
"""

from __future__ import annotations

from typing import Final

SCRIPT: Final = """\
import json, os, socket, sys, time
path = os.environ.get("OVSDB_SOCKET", "/run/openvswitch/db.sock")
request = {"method": "transact", "id": 0, "params": ["Open_vSwitch",
    {"op": "select", "table": "Open_vSwitch", "where": [], "columns": ["external_ids"]}]}
def has_system_id():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(path)
        s.sendall(json.dumps(request).encode())
        decoder, buf = json.JSONDecoder(), ""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return False
            buf += chunk.decode()
            while buf.strip():
                try:
                    msg, end = decoder.raw_decode(buf.lstrip())
                except ValueError:
                    break
                buf = buf.lstrip()[end:]
                if msg.get("id") != 0:
                    continue
                for row in ((msg.get("result") or [{}])[0].get("rows") or []):
                    ids = row.get("external_ids") or ["map", []]
                    if any(k == "system-id" for k, _ in ids[1]):
                        return True
                return False
    finally:
        s.close()
def reason(err):
    if isinstance(err, PermissionError):
        return ("permission denied on %s for uid %d gid %d: the node must let this user connect "
                "to its OVSDB socket (docs/operations.md, node prerequisites)"
                % (path, os.getuid(), os.getgid()))
    if isinstance(err, FileNotFoundError):
        return "%s does not exist (no Open vSwitch on this node yet)" % path
    if isinstance(err, ConnectionRefusedError):
        return "nothing answers on %s (ovsdb-server not running)" % path
    return "%s: %s" % (type(err).__name__, err)
while True:
    try:
        if has_system_id():
            sys.exit(0)
        why = "no Open_vSwitch row has external_ids:system-id yet"
    except Exception as err:
        why = reason(err)
    print("waiting for the OVN chassis (external_ids:system-id): " + why, flush=True)
    time.sleep(2)
"""
