"""Build (or reuse) the nova image trees of the real-Nova tier, one per supported release.

    python3 tools/realnova/images.py            # every release of tools/catalogs/releases.txt
    python3 tools/realnova/images.py 2026.1     # one release; prints each image's root directory

A tree is the source of a release's layer of its nova image: ``tools/realnode/nova_image.py`` takes
its venv, probe and nova directories and puts them over a Debian base of its own (Debian's Python
3.11, the shell, GNU coreutils and awk, noVNC's web files) into the OCI image the real nodes run.
Here the host's ``/usr`` takes that base's place, as a tree only (nothing runs in it): a Debian
host's ``/usr`` holds the same programs, so the contract can be checked before any base exists.
The tree is built from what the image contract says (``nova_operator/image_contract.py``, the source
of ``docs/image-contract.md``), so the two cannot drift, and from that release's catalog venv
(``tools/catalogs/ensure_venvs.sh``: nova, uWSGI, PyMySQL, pymemcache, python-memcached,
python-binary-memcached, built with Debian's interpreter):

- the venv, relocated to the contract's ``/var/lib/openstack`` (its scripts' shebangs rewritten),
  its modules byte-compiled against their sources' hashes (``byte_compile``);
  nova's ``etc/nova/api-paste.ini`` comes with it, where ``OS_NOVA_CONFIG_FILES`` names it;
- ``nova-amqp-ready`` at the contract's absolute path, from the operator's reference script;
- ``/etc`` with the nova user and group (uid/gid 42424), ``nsswitch.conf``, the host's
  ``/etc/alternatives`` links (Debian's ``awk`` is one); ``/tmp`` (1777);
  ``/var/lib/nova`` and ``/var/log/nova`` owned by the nova user; the merged-/usr links.

Every path and binary the contract names is then checked in the tree (``/usr`` looked up on the
host); a missing one fails the build. A tree is reused while its marker (the venv's marker, the
contract, the probe script, this file) is unchanged. Cold: a few seconds per release (a copy of the
venv). Standard library only: runs with any Python 3.11.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
CONTRACT_SCRIPT = REPO / "nova_operator" / "image_contract.py"
AMQP_READY = REPO / "nova_operator" / "data" / "nova-amqp-ready"
RELEASES = REPO / "tools" / "catalogs" / "releases.txt"
VENVS = pathlib.Path(os.environ.get("NOVA_VENV_CACHE", "/var/cache/nova-operator/nova-venvs"))
IMAGES = pathlib.Path(os.environ.get("NOVA_IMAGE_CACHE", "/var/cache/nova-operator/realnova/images"))
HOST_USR = pathlib.Path("/usr")  # where the check looks up the image's /usr (its base's in the image)
MERGED_USR_LINKS = ("bin", "lib", "lib64", "sbin")


def contract() -> dict[str, object]:
    out = subprocess.run([sys.executable, str(CONTRACT_SCRIPT), "json"], check=True, capture_output=True)
    data: dict[str, object] = json.loads(out.stdout)
    return data


def releases(wanted: list[str]) -> list[str]:
    names = []
    for line in RELEASES.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            names.append(line.split()[0])
    unknown = set(wanted) - set(names)
    if unknown:
        raise SystemExit(f"unknown release(s) {sorted(unknown)}; {RELEASES} lists {names}")
    return [n for n in names if not wanted or n in wanted]


def marker(venv: pathlib.Path, data: dict[str, object]) -> str:
    digest = hashlib.sha256()
    digest.update((venv / ".installed").read_bytes())
    digest.update(json.dumps(data, sort_keys=True).encode())
    digest.update(AMQP_READY.read_bytes())
    digest.update(pathlib.Path(__file__).read_bytes())
    return digest.hexdigest()


def resolve(root: pathlib.Path, path: str) -> pathlib.Path:
    """Where ``path`` of the container is on the host: under /usr the host's own, else the tree."""
    inside = pathlib.PurePosixPath(path)
    first = inside.parts[1] if len(inside.parts) > 1 else ""
    if first in MERGED_USR_LINKS:
        inside = pathlib.PurePosixPath("/usr", *inside.parts[1:])
    if inside.parts[1:2] == ("usr",):
        return HOST_USR.joinpath(*inside.parts[2:])
    return root.joinpath(*inside.parts[1:])


def follow(root: pathlib.Path, path: str) -> pathlib.Path | None:
    """The host file behind ``path`` as the container sees it: symbolic links followed inside the
    container's view (a link into ``/etc/alternatives`` must resolve in the image's ``/etc``)."""
    inside = pathlib.PurePosixPath(path)
    for _ in range(40):
        host = resolve(root, str(inside))
        if not host.is_symlink():
            return host if host.exists() else None
        target = pathlib.PurePosixPath(os.readlink(host))
        inside = target if target.is_absolute() else inside.parent / target
    return None


def on_path(root: pathlib.Path, name: str, path: list[str]) -> pathlib.Path | None:
    for directory in path:
        candidate = follow(root, f"{directory}/{name}")
        if candidate is not None and candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def check(root: pathlib.Path, data: dict[str, object], path: list[str]) -> list[str]:
    """What the contract names and the tree lacks."""
    missing = []
    for entry in data["paths"]:  # type: ignore[attr-defined]
        where = follow(root, entry["path"])
        ok = where is not None and (where.is_dir() if entry["kind"] == "directory" else where.is_file())
        if not ok:
            missing.append(f"{entry['kind']} {entry['path']} ({entry['used_by']})")
    for binary in data["binaries"]:  # type: ignore[attr-defined]
        name = binary["name"]
        found = follow(root, name) if name.startswith("/") else on_path(root, name, path)
        if found is None or not found.is_file() or not os.access(found, os.X_OK):
            missing.append(f"binary {name} ({binary['used_by']})")
    return missing


def relocate(tree: pathlib.Path, old: str, new: str) -> None:
    """Rewrite ``old`` to ``new`` in the venv's text scripts (shebangs, activate)."""
    for script in (tree / "bin").iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        body = script.read_bytes()
        if old.encode() in body and b"\0" not in body[:4096]:
            script.write_bytes(body.replace(old.encode(), new.encode()))


def byte_compile(interpreter: pathlib.Path, lib: pathlib.Path) -> None:
    """Every module under ``lib`` compiled again, its ``.pyc`` checked against its source's hash.

    pip writes timestamp ``.pyc`` files: each records its source's modification time. The image's
    layer sets every file's time to 0 (a reproducible tar), so in the image no ``.pyc`` matched its
    source and, on the read-only root, every nova process compiled each module it imports again, at
    every start: 3.4 CPU-seconds to import nova's compute manager and API routes instead of 1.4."""
    done = subprocess.run(
        [
            str(interpreter),
            "-m",
            "compileall",
            "-q",
            "-f",
            "-j0",
            "--invalidation-mode",
            "checked-hash",
            str(lib),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"compileall failed in {lib}:\n{(done.stdout + done.stderr)[-3000:]}")


def build(release: str, data: dict[str, object]) -> pathlib.Path:
    venv = VENVS / release
    if not (venv / ".installed").is_file():
        raise SystemExit(
            f"no nova venv for {release} at {venv}: run tools/catalogs/ensure_venvs.sh {release}"
        )
    interpreter = (venv / "bin" / "python").resolve()
    if not str(interpreter).startswith(str(HOST_USR) + "/"):
        raise SystemExit(
            f"the nova venv {venv} runs {interpreter}, which the image cannot carry (only the host's /usr "
            f"is bound into it): rebuild it with tools/catalogs/ensure_venvs.sh {release}"
        )
    dest = IMAGES / release
    want = marker(venv, data)
    if (dest / ".image").is_file() and (dest / ".image").read_text() == want:
        return dest
    uid, gid = int(data["uid"]), int(data["gid"])  # type: ignore[call-overload]
    prefix = "/var/lib/openstack"
    tmp = IMAGES / f".{release}.tmp.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    root = tmp / "root"
    root.mkdir(parents=True)
    (root / "usr").mkdir()
    for link in MERGED_USR_LINKS:
        (root / link).symlink_to(f"usr/{link}")
    for d in ("etc", "tmp", "run", "var/lib/nova", "var/log/nova", "var/lib/openstack", "root", "home"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    for d in ("var/lib/nova", "var/log/nova"):
        os.chown(root / d, uid, gid)
    (root / "etc" / "passwd").write_text(
        f"root:x:0:0:root:/root:/bin/sh\nnova:x:{uid}:{gid}:nova:/var/lib/nova:/usr/sbin/nologin\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    )
    (root / "etc" / "group").write_text(f"root:x:0:\nnova:x:{gid}:\nnogroup:x:65534:\n")
    (root / "etc" / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files dns\n")
    (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n")
    # Debian's /usr links some programs (awk, ...) through /etc/alternatives: the image keeps the links.
    shutil.copytree("/etc/alternatives", root / "etc" / "alternatives", symlinks=True)
    shutil.copytree(venv, root / prefix.lstrip("/"), symlinks=True, dirs_exist_ok=True)
    relocate(root / prefix.lstrip("/"), str(venv), prefix)
    probe = root / prefix.lstrip("/") / "bin" / "nova-amqp-ready"
    shutil.copyfile(AMQP_READY, probe)
    probe.chmod(0o755)
    byte_compile(interpreter, root / prefix.lstrip("/") / "lib")
    path = [f"{prefix}/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
    missing = check(root, data, path)
    if missing:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SystemExit(f"image {release} lacks what the image contract names: " + "; ".join(missing))
    subprocess.run(["chmod", "-R", "a+rX", str(root / prefix.lstrip("/"))], check=True)
    (tmp / "env.json").write_text(json.dumps({"PATH": ":".join(path)}))
    (tmp / ".image").write_text(want)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def main(argv: list[str]) -> int:
    data = contract()
    IMAGES.mkdir(parents=True, exist_ok=True)
    for release in releases(argv):
        print(build(release, data))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
