"""A container's environment as the kubelet builds it, and ``$(VAR)`` expansion (pure).

Order, as the kubelet's: ``envFrom`` sources in turn (keys that are no valid variable name are
skipped), then ``env`` entries in turn, each ``value`` expanded against the variables defined before
it. ``command`` and ``args`` are expanded against the whole environment. A missing ConfigMap, Secret
or key that is not ``optional`` raises ``ConfigError`` with the kubelet's message; the container then
waits with ``CreateContainerConfigError``.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, Protocol

from simcluster.realtier.kubelet import quantity

JSON = dict[str, Any]
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


class ConfigError(Exception):
    """A reference the container cannot start without (reason ``CreateContainerConfigError``)."""


class Objects(Protocol):
    """The API objects a pod reads (``None``: not found)."""

    def configmap(self, name: str) -> JSON | None: ...

    def secret(self, name: str) -> JSON | None: ...


class FetchedObjects:
    """``Objects`` read beforehand: by name, ``None`` for those not found."""

    def __init__(self, configmaps: dict[str, JSON | None], secrets: dict[str, JSON | None]) -> None:
        self._cm, self._secret = configmaps, secrets

    def configmap(self, name: str) -> JSON | None:
        return self._cm.get(name)

    def secret(self, name: str) -> JSON | None:
        return self._secret.get(name)


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: ``$(NAME)`` becomes the value of a defined NAME (undefined
    ones stay as written), ``$$`` becomes ``$``, any other ``$`` stays."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "$" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            end = text.find(")", i + 2)
            if end < 0:  # unterminated: kept as written
                out.append(text[i:])
                break
            name = text[i + 2 : end]
            out.append(env[name] if name in env else text[i : end + 1])
            i = end + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def config_data(obj: JSON) -> dict[str, bytes]:
    """Every key of a ConfigMap (``data`` and ``binaryData``) or Secret (``data``), as bytes."""
    out: dict[str, bytes] = {}
    if obj.get("kind") == "Secret" or "type" in obj:
        for key, value in (obj.get("data") or {}).items():
            out[key] = base64.b64decode(value)
        return out
    for key, value in (obj.get("data") or {}).items():
        out[key] = value.encode()
    for key, value in (obj.get("binaryData") or {}).items():
        out[key] = base64.b64decode(value)
    return out


def _lookup(objects: Objects, kind: str, name: str) -> JSON | None:
    return objects.configmap(name) if kind == "ConfigMap" else objects.secret(name)


def _not_found(kind: str, name: str) -> ConfigError:
    return ConfigError(f'{"configmap" if kind == "ConfigMap" else "secret"} "{name}" not found')


def field_value(pod: JSON, path: str) -> str:
    """The value of a downward-API ``fieldRef.fieldPath``."""
    meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status") or {}
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.hostIP": status.get("hostIP", ""),
        "status.podIP": status.get("podIP", ""),
        "status.hostIPs": ",".join(i["ip"] for i in status.get("hostIPs") or []),
        "status.podIPs": ",".join(i["ip"] for i in status.get("podIPs") or []),
    }
    if path in simple:
        return str(simple[path])
    for field in ("labels", "annotations"):
        if path == f"metadata.{field}":
            values = meta.get(field) or {}
            return "\n".join(f"{k}={json.dumps(values[k])}" for k in sorted(values))
        match = re.fullmatch(rf"metadata\.{field}\['(.+)'\]", path)
        if match:
            return str((meta.get(field) or {}).get(match.group(1), ""))
    raise ConfigError(f"unsupported fieldPath: {path}")


def resource_value(pod: JSON, container_name: str | None, ref: JSON, allocatable: Mapping[str, str]) -> str:
    """The value of a ``resourceFieldRef``: a limit falls back to the node's allocatable."""
    name = ref.get("containerName") or container_name
    container = next(
        (
            c
            for c in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", [])
            if c["name"] == name
        ),
        None,
    )
    if container is None:
        raise ConfigError(f"resourceFieldRef names no container: {name}")
    kind, _, resource = ref["resource"].partition(".")
    resources = (container.get("resources") or {}).get(kind) or {}
    raw = resources.get(resource)
    if raw is None:
        raw = allocatable.get(resource, "0") if kind == "limits" else "0"
    divisor = quantity.parse(ref.get("divisor") or "1")
    if divisor == 0:
        divisor = Fraction(1)
    return str(quantity.ceil_div(quantity.parse(raw), divisor))


def build(
    pod: JSON,
    container: JSON,
    objects: Objects,
    allocatable: Mapping[str, str],
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The container's environment (``base`` first: the image's and the service variables)."""
    env: dict[str, str] = dict(base or {})
    for source in container.get("envFrom") or []:
        for kind, field in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            ref = source.get(field)
            if ref is None:
                continue
            obj = _lookup(objects, kind, ref["name"])
            if obj is None:
                if ref.get("optional"):
                    continue
                raise _not_found(kind, ref["name"])
            for key, value in config_data(obj).items():
                name = source.get("prefix", "") + key
                if _ENV_NAME.match(name):
                    env[name] = value.decode(errors="replace")
    for var in container.get("env") or []:
        name = var["name"]
        source = var.get("valueFrom")
        if source is None:
            env[name] = expand(var.get("value", ""), env)
            continue
        if "fieldRef" in source:
            env[name] = field_value(pod, source["fieldRef"]["fieldPath"])
        elif "resourceFieldRef" in source:
            env[name] = resource_value(pod, container["name"], source["resourceFieldRef"], allocatable)
        else:
            kind, ref = (
                ("ConfigMap", source["configMapKeyRef"])
                if "configMapKeyRef" in source
                else ("Secret", source["secretKeyRef"])
            )
            obj = _lookup(objects, kind, ref["name"])
            if obj is None:
                if ref.get("optional"):
                    continue
                raise _not_found(kind, ref["name"])
            data = config_data(obj)
            if ref["key"] not in data:
                if ref.get("optional"):
                    continue
                ns = pod["metadata"].get("namespace", "")
                raise ConfigError(f"couldn't find key {ref['key']} in {kind} {ns}/{ref['name']}")
            env[name] = data[ref["key"]].decode(errors="replace")
    return env


def argv(container: JSON, env: Mapping[str, str], entrypoint: Sequence[str], cmd: Sequence[str]) -> list[str]:
    """The process's argv: ``command`` replaces the image's entrypoint (and its cmd), ``args`` the
    image's cmd; both expanded against ``env``."""
    command = container.get("command")
    args = container.get("args")
    if command:
        words = [expand(w, env) for w in command] + [expand(w, env) for w in args or []]
    elif args is not None:
        words = list(entrypoint) + [expand(w, env) for w in args]
    else:
        words = list(entrypoint) + list(cmd)
    return words


def references(pod: JSON) -> tuple[set[str], set[str]]:
    """Names of the ConfigMaps and Secrets the pod's env and volumes read."""
    configmaps: set[str] = set()
    secrets: set[str] = set()
    spec = pod.get("spec", {})
    for c in spec.get("initContainers", []) + spec.get("containers", []):
        for source in c.get("envFrom") or []:
            if "configMapRef" in source:
                configmaps.add(source["configMapRef"]["name"])
            if "secretRef" in source:
                secrets.add(source["secretRef"]["name"])
        for var in c.get("env") or []:
            value_from = var.get("valueFrom") or {}
            if "configMapKeyRef" in value_from:
                configmaps.add(value_from["configMapKeyRef"]["name"])
            if "secretKeyRef" in value_from:
                secrets.add(value_from["secretKeyRef"]["name"])
    for vol in spec.get("volumes") or []:
        if "configMap" in vol:
            configmaps.add(vol["configMap"]["name"])
        if "secret" in vol:
            secrets.add(vol["secret"]["secretName"])
        for source in (vol.get("projected") or {}).get("sources") or []:
            if "configMap" in source:
                configmaps.add(source["configMap"]["name"])
            if "secret" in source:
                secrets.add(source["secret"]["name"])
    return configmaps, secrets
