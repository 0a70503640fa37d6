"""The five Deployments of a Nova, and the pod pieces the Jobs share with them.

Manifests are built as Python data (never YAML text), so no user value can change the
structure.  Pure: a function of the Nova and :class:`WorkloadInputs` only.

Environment order (spec nova-crd §9.2): bus, databases, passwords, role extras.  Every
credential arrives as a ``secretKeyRef``; nothing secret is ever a literal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from nova_operator import image_contract, naming
from nova_operator.models.common import (
    DeploymentSpec,
    ImagePullSecretRef,
    ProbeTiming,
    ResourceRequirements,
    ServerProbeSpec,
)
from nova_operator.models.nova import Nova
from nova_operator.naming import Component
from nova_operator.renderers.novaconf import CONFIG_DIR, POLICY_CONF, POLICY_DIR, POLICY_YAML
from nova_operator.renderers.pod_env import (
    base_env,
    cache_tls_volume,
    config_volume,
    db_tls_volumes,
    https_ca_volume,
    nova_name,
    oslo_credentials,
    rabbit_ca_volume,
    secret_config_env,
    secret_env,
)

__all__ = [
    "OPENSTACK_GID",
    "OPENSTACK_UID",
    "Digests",
    "WorkloadInputs",
    "deployment",
    "deployments",
    "image_pull_policy",
    "image_pull_secrets",
    "image_ref",
    "job_pod_settings",
    "memory_figure",
    "plain",
    "resolve_resources",
    "restricted_container_security_context",
]

Manifest = dict[str, Any]

OPENSTACK_UID = image_contract.UID
OPENSTACK_GID = image_contract.GID
STATE_PATH = "/var/lib/nova"
API_PASTE = image_contract.API_PASTE
DEFAULT_GRACE = 30
DEFAULT_PRE_STOP = 5
MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Digests:
    """SHA-256 digests of the credentials (``digests.credential_digest``); empty = unknown, not stamped."""

    api_db_connection: str = ""
    db_connection: str = ""
    authtoken: str = ""
    transport_url: str = ""
    metadata_secret: str = ""
    secret_config: str = ""  # keyed digest of the spec.secretConfig values
    https_ca: str = ""  # SHA-256 of the spec.tls CA bundle (public: not keyed)


@dataclass(frozen=True, slots=True)
class WorkloadInputs:
    """What a pass hands the workload renderers besides the Nova."""

    config_map: str  # the {name}-config-<hash> ConfigMap the pods mount
    digests: Digests = field(default_factory=Digests)
    broker_port: int = 5672  # port of the resolved transport URL (NOVA_AMQP_PORT)
    secret_config_keys: tuple[str, ...] = ()  # section.option keys of {name}-secret-config
    # --secret-ref-label: mount the Nova's label-checked copies of the TLS Secrets, not the spec's own
    checked_copies: bool = False
    policy_map: str = ""  # the {name}-policy-<hash> ConfigMap the API and metadata pods mount ("": none)

    @property
    def policy(self) -> bool:
        """spec.policy has a ConfigMap (the policy file and its overlay): the API and metadata read it."""
        return bool(self.policy_map)


# --------------------------------------------------------------------------- small pieces


def plain(manifest: Manifest) -> Manifest:
    """A deep, JSON-clean copy: no object shared between two places of a manifest or with the CR."""
    return json.loads(json.dumps(manifest))  # type: ignore[no-any-return]


def _namespace(nova: Nova) -> str:
    return nova.metadata.namespace or "default"


def image_ref(nova: Nova) -> str:
    """``repository@digest`` when a digest is set, else ``repository:tag``."""
    image = nova.spec.image
    if image.digest:
        return f"{image.repository}@{image.digest}"
    return f"{image.repository}:{image.tag}"


def image_pull_secrets(refs: list[ImagePullSecretRef] | None) -> Manifest:
    """``{"imagePullSecrets": [{name}, ...]}`` for a pod spec, or nothing when no Secret is named."""
    return {"imagePullSecrets": [{"name": ref.name} for ref in refs]} if refs else {}


def image_pull_policy(nova: Nova) -> Manifest:
    """``{"imagePullPolicy": ...}`` for a Nova's container, only while ``spec.image.pullPolicy`` is set."""
    policy = nova.spec.image.pull_policy
    return {"imagePullPolicy": policy} if policy else {}


def restricted_container_security_context() -> Manifest:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsGroup": OPENSTACK_GID,
        "runAsNonRoot": True,
        "runAsUser": OPENSTACK_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security_context() -> Manifest:
    return {
        "fsGroup": OPENSTACK_GID,
        "runAsGroup": OPENSTACK_GID,
        "runAsNonRoot": True,
        "runAsUser": OPENSTACK_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _role_env(nova: Nova, component: Component, inputs: WorkloadInputs) -> list[Manifest]:
    env = base_env(nova, api_db=component is not Component.NOVNCPROXY)
    if component is Component.METADATA:
        env.append(
            secret_env(
                "OS_NEUTRON__METADATA_PROXY_SHARED_SECRET",
                oslo_credentials(nova),
                "metadata_proxy_shared_secret",
            )
        )
    if component in (Component.API, Component.METADATA):
        files = f"{API_PASTE};nova.conf" + (";metadata.conf" if component is Component.METADATA else "")
        files += f";{POLICY_DIR}/{POLICY_CONF}" if inputs.policy else ""  # last: its policy_file wins
        env.append({"name": "OS_NOVA_CONFIG_DIR", "value": CONFIG_DIR})
        env.append({"name": "OS_NOVA_CONFIG_FILES", "value": files})
    if component in (Component.SCHEDULER, Component.CONDUCTOR):
        env.append({"name": "NOVA_AMQP_PORT", "value": str(inputs.broker_port)})
    return env + secret_config_env(naming.secret_config_secret(nova_name(nova)), inputs.secret_config_keys)


def _json_logging(nova: Nova) -> bool:
    return nova.spec.logging.format == "json"


# --------------------------------------------------------------------------- resources


def memory_figure(processes: int, threads: int = 1) -> str:
    """``16Mi + processes * (352Mi + (threads - 1) * 32Mi)`` (spec nova-crd §2.11)."""
    processes, threads = max(processes, 1), max(threads, 1)
    return f"{16 + processes * (352 + (threads - 1) * 32)}Mi"


def resolve_resources(resources: ResourceRequirements | None, memory: str, *, cpu: str = "70m") -> Manifest:
    """CPU named nowhere: a ``cpu`` request; memory named nowhere: ``memory`` as request = limit."""
    requests = dict((resources.requests or {}) if resources else {})
    limits = dict((resources.limits or {}) if resources else {})
    if "cpu" not in requests and "cpu" not in limits:
        requests["cpu"] = cpu
    if "memory" not in requests and "memory" not in limits:
        requests["memory"] = memory
        limits["memory"] = memory
    out: Manifest = {}
    if limits:
        out["limits"] = dict(sorted(limits.items()))
    if requests:
        out["requests"] = dict(sorted(requests.items()))
    return out


# --------------------------------------------------------------------------- placement


def _deployment_block(nova: Nova, component: Component) -> DeploymentSpec:
    spec = nova.spec
    if component is Component.API:
        return spec.api.deployment
    if component is Component.METADATA:
        return spec.metadata.deployment
    if component is Component.SCHEDULER:
        return spec.scheduler.deployment
    if component is Component.CONDUCTOR:
        return spec.conductor.deployment
    block = spec.console_proxy.effective_deployment
    return block if block is not None else DeploymentSpec(replicas=1)


def _dump(value: Any) -> Any:
    """A model (or list of models) as the API's camelCase JSON, unset fields left out."""
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    return value


def _placement(block: DeploymentSpec) -> Manifest:
    out: Manifest = {}
    if block.priority_class_name:
        out["priorityClassName"] = block.priority_class_name
    if block.node_selector:
        out["nodeSelector"] = dict(block.node_selector)
    if block.tolerations:
        out["tolerations"] = _dump(list(block.tolerations))
    if block.affinity:
        out["affinity"] = dict(block.affinity)
    return out


def job_pod_settings(nova: Nova) -> tuple[Manifest, ResourceRequirements | None]:
    """Pod placement of the Jobs and the CronJob: ``spec.jobs``, each field falling back to the API block.

    priorityClassName / nodeSelector / tolerations: nil falls back, empty opts out.
    affinity: nil copies only the API block's *node* affinity (never pod (anti-)affinity).
    """
    api = nova.spec.api.deployment
    jobs = nova.spec.jobs
    out: Manifest = {}
    priority = jobs.priority_class_name if jobs is not None and jobs.priority_class_name is not None else None
    if priority is None:
        priority = api.priority_class_name
    if priority:
        out["priorityClassName"] = priority
    node_selector = (
        jobs.node_selector if jobs is not None and jobs.node_selector is not None else api.node_selector
    )
    if node_selector:
        out["nodeSelector"] = dict(node_selector)
    tolerations = jobs.tolerations if jobs is not None and jobs.tolerations is not None else api.tolerations
    if tolerations:
        out["tolerations"] = _dump(list(tolerations))
    if jobs is not None and jobs.affinity is not None:
        if jobs.affinity:
            out["affinity"] = dict(jobs.affinity)
    elif api.affinity and "nodeAffinity" in api.affinity:
        out["affinity"] = {"nodeAffinity": api.affinity["nodeAffinity"]}
    return out, jobs.resources if jobs is not None else None


def _topology_spread(block: DeploymentSpec, selector: Mapping[str, str]) -> list[Manifest] | None:
    if block.topology_spread_constraints is not None:
        return [dict(c) for c in block.topology_spread_constraints] or None
    return [
        {
            "labelSelector": {"matchLabels": dict(selector)},
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "ScheduleAnyway",
        }
        for key in ("topology.kubernetes.io/zone", "kubernetes.io/hostname")
    ]


def _strategy(block: DeploymentSpec) -> Manifest:
    """The user's strategy; a ``rollingUpdate`` without ``type`` is a RollingUpdate (the Kubernetes
    default type), as written, its unset fields defaulted by the API server as for any Deployment.
    Only a strategy naming neither gets the operator's surge-first default."""
    strategy = block.strategy
    if strategy is not None and (strategy.type is not None or strategy.rolling_update is not None):
        dumped: Manifest = _dump(strategy)
        dumped.setdefault("type", "RollingUpdate")
        return dumped
    return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}


# --------------------------------------------------------------------------- the Deployments

_PROBE_HTTP = {"scheme": "HTTP"}


def _http_probes(port: str, path: str = "/") -> Manifest:
    get = {"path": path, "port": port, **_PROBE_HTTP}
    return {
        "startupProbe": {"httpGet": get, "periodSeconds": 10, "failureThreshold": 30, "timeoutSeconds": 8},
        # metadata: upstream sets no liveness timeout (kubelet's 1 s); 10 s as on the API is a safe deviation
        "livenessProbe": {
            "httpGet": get,
            "initialDelaySeconds": 15,
            "periodSeconds": 20,
            "timeoutSeconds": 10,
        },
        "readinessProbe": {
            "httpGet": get,
            "initialDelaySeconds": 10,
            "periodSeconds": 15,
            "timeoutSeconds": 10,
            "failureThreshold": 3,
        },
    }


_WSGI = {
    Component.API: ("nova.wsgi.osapi_compute:application", 8774, "nova-api"),
    Component.METADATA: ("nova.wsgi.metadata:application", 8775, "nova-metadata"),
}


def _uwsgi_command(nova: Nova, component: Component) -> list[str]:
    module, port, _ = _WSGI[component]
    uwsgi = nova.spec.api.uwsgi if component is Component.API else nova.spec.metadata.uwsgi
    command = [
        "uwsgi",
        "--master",
        "--die-on-term",
        "--need-app",
        "--http",
        f":{port}",
        "--module",
        module,
        "--processes",
        str(uwsgi.processes),
        "--threads",
        str(uwsgi.threads),
    ]
    if uwsgi.http_keep_alive:
        # uWSGI 2.0 has no --http-keepalive-timeout: the idle timeout is the optional argument of
        # --http-keepalive itself, which getopt only takes in the attached `=N` form.
        timeout = uwsgi.http_keep_alive_timeout
        command.append("--http-keepalive" if timeout is None else f"--http-keepalive={timeout}")
    if uwsgi.harakiri is not None:
        command += ["--harakiri", str(uwsgi.harakiri)]
    # each worker loads nova itself (as upstream's and devstack's uWSGI configs do): nothing the
    # app opens at import (oslo.messaging transports, DB pools) is shared by forked workers
    command.append("--lazy-apps")
    if _json_logging(nova):
        command += _UWSGI_JSON_REQUEST_LOG
    return command


# Under ``logging.format: json`` uWSGI's line per request (plain text by default, one for every probe
# too) becomes a JSON record: its own request logger with the json encoder, which escapes the line
# into ``message``. Only the request log: ``--log-encoder`` would also wrap nova's own records, which
# reach uWSGI's log through the workers' stderr, into a string. uWSGI's start-up lines stay as they
# are (docs/operations.md, "Logs").
_UWSGI_JSON_REQUEST_LOG: Final = (
    "--req-logger",
    "stdio",
    "--log-req-encoder",
    'json {"name": "uwsgi.request", "levelname": "INFO", "message": "${msg}"}',
    "--log-req-encoder",
    "nl",
)


def _memory(nova: Nova, component: Component) -> str:
    spec = nova.spec
    if component is Component.API:
        return memory_figure(spec.api.uwsgi.processes, spec.api.uwsgi.threads)
    if component is Component.METADATA:
        return memory_figure(spec.metadata.uwsgi.processes, spec.metadata.uwsgi.threads)
    if component is Component.SCHEDULER:
        return memory_figure(spec.scheduler.workers)
    if component is Component.CONDUCTOR:
        return memory_figure(spec.conductor.workers)
    return memory_figure(1)


def _annotations(nova: Nova, component: Component, digests: Digests) -> dict[str, str]:
    stamped = {
        "nova.c5c3.io/api-db-connection-hash": digests.api_db_connection,
        "nova.c5c3.io/db-connection-hash": digests.db_connection,
        "nova.c5c3.io/authtoken-hash": digests.authtoken,
        "nova.c5c3.io/transport-url-hash": digests.transport_url,
        "nova.c5c3.io/secret-config-hash": digests.secret_config,
        "nova.c5c3.io/https-ca-hash": digests.https_ca,
    }
    if component is Component.METADATA:
        stamped["nova.c5c3.io/metadata-secret-hash"] = digests.metadata_secret
    if component is not Component.API:
        status = nova.status
        installed = status.installed_release if status is not None and status.installed_release else None
        stamped["nova.c5c3.io/installed-release"] = installed or nova.spec.open_stack_release
    return {k: v for k, v in sorted(stamped.items()) if v}


def _config_mounts(
    nova: Nova, component: Component, inputs: WorkloadInputs
) -> tuple[list[Manifest], list[Manifest]]:
    config_map = inputs.config_map
    shared = ["nova.conf"]
    if component is Component.METADATA:
        shared.append("metadata.conf")
    if _json_logging(nova):
        shared.append("logging.ini")
    volumes = [config_volume(config_map, sorted(shared))]
    mounts = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}]
    if component in (Component.API, Component.METADATA) and inputs.policy:
        volumes.append(config_volume(inputs.policy_map, [POLICY_CONF, POLICY_YAML], name="policy"))
        mounts.append({"name": "policy", "mountPath": POLICY_DIR, "readOnly": True})
    overlay = {
        Component.SCHEDULER: "scheduler.conf",
        Component.CONDUCTOR: "conductor.conf",
        Component.NOVNCPROXY: "novncproxy.conf",
    }.get(component)
    if overlay is not None:
        role_dir = f"/etc/nova/{overlay}.d"
        volumes.append(config_volume(config_map, [overlay], name="role-config"))
        mounts.append({"name": "role-config", "mountPath": role_dir, "readOnly": True})
    return volumes, mounts


def _time_probes(container: Manifest, block: DeploymentSpec) -> None:
    """The block's probe timing over the operator's, field by field; the handlers stay as rendered."""
    probes = block.probes
    if probes is None:
        return
    timings: dict[str, ProbeTiming | None] = {"readinessProbe": probes.readiness}
    if isinstance(probes, ServerProbeSpec):
        timings |= {"startupProbe": probes.startup, "livenessProbe": probes.liveness}
    for key, timing in timings.items():
        if timing is not None and key in container:
            container[key] = {**container[key], **timing.model_dump(by_alias=True, exclude_none=True)}


def _container(nova: Nova, component: Component, inputs: WorkloadInputs, block: DeploymentSpec) -> Manifest:
    container: Manifest = {"name": str(component), "image": image_ref(nova), **image_pull_policy(nova)}
    if component in _WSGI:
        _, port, port_name = _WSGI[component]
        container["command"] = _uwsgi_command(nova, component)
        container["ports"] = [{"name": port_name, "containerPort": port, "protocol": "TCP"}]
        container.update(_http_probes(port_name))
    elif component is Component.NOVNCPROXY:
        container["command"] = [
            "nova-novncproxy",
            "--config-dir",
            CONFIG_DIR,
            "--config-dir",
            "/etc/nova/novncproxy.conf.d",
        ]
        container["ports"] = [{"name": "novncproxy", "containerPort": 6080, "protocol": "TCP"}]
        container["readinessProbe"] = {
            "httpGet": {"path": "/vnc_lite.html", "port": "novncproxy", **_PROBE_HTTP}
        }
    else:
        process = f"nova-{component}"
        container["command"] = [
            process,
            "--config-dir",
            CONFIG_DIR,
            "--config-dir",
            f"/etc/nova/{component}.conf.d",
        ]
        container["readinessProbe"] = {
            "exec": {"command": [image_contract.NOVA_AMQP_READY]},
            "periodSeconds": 5,
            "timeoutSeconds": 5,
            "failureThreshold": 1,
        }
    _time_probes(container, block)
    container["env"] = _role_env(nova, component, inputs)
    pre_stop = block.pre_stop_sleep_seconds if block.pre_stop_sleep_seconds is not None else DEFAULT_PRE_STOP
    container["lifecycle"] = {"preStop": {"exec": {"command": ["sleep", str(pre_stop)]}}}
    container["resources"] = resolve_resources(block.resources, _memory(nova, component))
    container["securityContext"] = restricted_container_security_context()
    return container


def deployment(nova: Nova, component: Component, inputs: WorkloadInputs) -> Manifest:
    """The Deployment of one of the five roles."""
    name = nova_name(nova)
    block = _deployment_block(nova, component)
    selector = naming.selector_labels(name, component)
    labels = naming.labels(name, component)

    config_volumes, config_mounts = _config_mounts(nova, component, inputs)
    tls_volumes, tls_mounts = db_tls_volumes(nova, checked=inputs.checked_copies)
    ca_volumes, ca_mounts = rabbit_ca_volume(nova, checked=inputs.checked_copies)
    https_volumes, https_mounts = https_ca_volume(nova, checked=inputs.checked_copies)
    cache_volumes, cache_mounts = cache_tls_volume(nova, checked=inputs.checked_copies)
    container = _container(nova, component, inputs, block)
    container["volumeMounts"] = [
        *config_mounts,
        {"name": "state", "mountPath": STATE_PATH},
        {"name": "tmp", "mountPath": "/tmp"},
        *tls_mounts,
        *ca_mounts,
        *https_mounts,
        *cache_mounts,
    ]
    grace = block.termination_grace_period_seconds
    pod_spec: Manifest = {
        "automountServiceAccountToken": False,
        "containers": [container],
        "securityContext": pod_security_context(),
        "terminationGracePeriodSeconds": grace if grace is not None else DEFAULT_GRACE,
        "volumes": [
            *config_volumes,
            {"name": "state", "emptyDir": {}},
            {"name": "tmp", "emptyDir": {}},
            *tls_volumes,
            *ca_volumes,
            *https_volumes,
            *cache_volumes,
        ],
        **_placement(block),
        **image_pull_secrets(nova.spec.image.pull_secrets),
    }
    if (spread := _topology_spread(block, selector)) is not None:
        pod_spec["topologySpreadConstraints"] = spread
    template_meta: Manifest = {"labels": labels}
    if annotations := _annotations(nova, component, inputs.digests):
        template_meta["annotations"] = annotations
    spec: Manifest = {
        "selector": {"matchLabels": selector},
        "strategy": _strategy(block),
        "template": {"metadata": template_meta, "spec": pod_spec},
    }
    if not (component is Component.API and nova.spec.autoscaling is not None):
        spec["replicas"] = block.replicas  # while autoscaling is set, the HPA owns the API's count
    return plain(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": naming.deployment_name(name, component),
                "namespace": _namespace(nova),
                "labels": labels,
            },
            "spec": spec,
        }
    )


ROLES = (Component.API, Component.METADATA, Component.SCHEDULER, Component.CONDUCTOR, Component.NOVNCPROXY)


def deployments(nova: Nova, inputs: WorkloadInputs) -> dict[Component, Manifest]:
    """Every Deployment the Nova asks for (the console proxy only while it is enabled)."""
    return {
        role: deployment(nova, role, inputs)
        for role in ROLES
        if role is not Component.NOVNCPROXY or nova.spec.console_proxy.enabled
    }
