"""Every condition reason the operator can set, with what it means and what to do: the one table.

The reason strings themselves are the contract (reconciler.md §8.1, novacompute-crd.md §17); the
code that sets them keeps its own constants next to the step. This table is what a person reads:
``docs/troubleshooting.md`` is generated from it (``nova_operator.install.troubleshooting``), and
``tests/unit/test_reasons.py`` checks that every reason the code sets is here and that nothing here
is a reason the code cannot set.

An entry lists every condition type the reason appears on (``ANY_NOVA_STEP``: whichever step's
condition consumes the field or writes the child). Meanings and actions never ask the reader to
look at a credential: the messages name Secrets and keys, never values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from nova_operator import conditions as c

Kind = Literal["Nova", "NovaCompute"]

ANY_NOVA_STEP: Final = "any step's condition"
"""Stands for the condition of whichever Nova step met the problem."""


@dataclass(frozen=True)
class Reason:
    kind: Kind
    conditions: tuple[str, ...]
    status: Literal["True", "False"]
    reason: str
    meaning: str
    action: str


def _nova(
    conds: tuple[str, ...] | str, status: Literal["True", "False"], reason: str, meaning: str, action: str
) -> Reason:
    return Reason("Nova", (conds,) if isinstance(conds, str) else conds, status, reason, meaning, action)


def _pool(
    conds: tuple[str, ...] | str, status: Literal["True", "False"], reason: str, meaning: str, action: str
) -> Reason:
    return Reason(
        "NovaCompute", (conds,) if isinstance(conds, str) else conds, status, reason, meaning, action
    )


_NOTHING: Final = "Nothing."
_ROUTES: Final = (c.HTTP_ROUTE_READY, c.METADATA_HTTP_ROUTE_READY, c.CONSOLE_HTTP_ROUTE_READY)
_ROLES: Final = (
    (c.CONDUCTOR_READY, "Conductor", "nova-conductor", "conductor"),
    (c.SCHEDULER_READY, "Scheduler", "nova-scheduler", "scheduler"),
    (c.METADATA_READY, "Metadata", "the metadata API", "metadata"),
    (c.CONSOLE_PROXY_READY, "ConsoleProxy", "the noVNC console proxy", "consoleProxy"),
)


def _roles() -> list[Reason]:
    out = []
    for cond, role, what, field in _ROLES:
        out.append(_nova(cond, "True", f"{role}Ready", f"The Deployment of {what} is available.", _NOTHING))
        out.append(
            _nova(
                cond,
                "False",
                f"WaitingFor{role}",
                f"The Deployment of {what} is not available yet, or (during an upgrade) still rolling "
                "out the new image, or its PriorityClass (`priorityClassName`) does not exist; the "
                "message says which, and names a pod of it that cannot start (its waiting reason and "
                "image). A Deployment status change, or a pod that starts or stops being stuck, wakes the "
                "Nova; the upgrade and PriorityClass cases poll every 10 s.",
                f"`kubectl describe deployment` and its pods: image pull errors, unschedulable pods (check "
                f"`spec.{field}.deployment` resources, nodeSelector, tolerations), a crash loop "
                "(`kubectl logs`). It clears by itself once the pods are available.",
            )
        )
    return out


NOVA: Final[tuple[Reason, ...]] = (
    # -- SecretsReady -------------------------------------------------------------------------
    _nova(
        c.SECRETS_READY,
        "True",
        "SecretsAvailable",
        "Every referenced Secret exists with the keys it needs.",
        _NOTHING,
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "SecretStoreNotReady",
        "`spec.secretStoreRef` names a SecretStore or ClusterSecretStore that does not exist or is not "
        "Ready; "
        "nothing else is read until it is (requeue 15 s).",
        "Check the store with `kubectl get secretstore|clustersecretstore <name>` and the External Secrets "
        "operator's logs; or remove `spec.secretStoreRef` if the Secrets are written another way.",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "ClusterSecretStoreUnsupported",
        "`spec.secretStoreRef` names a ClusterSecretStore, but the operator is scoped to namespaces "
        "(`--namespace`) and reads nothing cluster-scoped.",
        "Name a SecretStore in the Nova's namespace instead, or run the operator cluster-wide.",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "WaitingForDBCredentials",
        "The Secret of `spec.apiDatabase.secretRef` or `spec.database.secretRef` is missing, or lacks a "
        "non-empty `username` or `password` (the message names which). Requeue 15 s.",
        "Create or fix that Secret in the Nova's namespace (keys `username` and `password`); the "
        "MariaDB User the operator creates uses the same Secret.",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "WaitingForServiceUserCredentials",
        "The Secret of `spec.serviceUser.secretRef` is missing or its key (`secretRef.key`, default "
        "`password`) is missing or empty. Requeue 15 s.",
        "Create the Secret with the Keystone service user's password under that key.",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "WaitingForMetadataSharedSecret",
        "The Secret of `spec.metadata.sharedSecretRef` is missing or lacks its key (default "
        "`shared_secret`). Requeue 15 s.",
        "Create the Secret with the metadata proxy shared secret (the same value Neutron's metadata agent "
        "uses).",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "MetadataSharedSecretEmpty",
        "The metadata shared secret's key exists but is empty: nova would verify instance metadata "
        "requests against an empty key, so the operator refuses it.",
        "Put a non-empty value under the key of `spec.metadata.sharedSecretRef`.",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "WaitingForMessagingCA",
        "`spec.messaging.tls` is set and the Secret of `caBundleSecretRef` is missing or lacks its key "
        "(default `ca.crt`). Requeue 15 s.",
        "Create the CA bundle Secret (cert-manager or by hand), or remove `spec.messaging.tls`.",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "WaitingForHTTPSCABundle",
        "`spec.tls` is set and the Secret of `caBundleSecretRef` is missing or lacks its key "
        "(default `ca.crt`). Requeue 15 s.",
        "Create the CA bundle Secret (cert-manager's `ca.crt`, trust-manager's bundle or by hand), or "
        "remove `spec.tls`.",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "WaitingForMessagingClientCert",
        "`spec.messaging.tls.clientCertSecretRef` is set and its Secret is missing or lacks `tls.crt` or "
        "`tls.key`. Requeue 15 s.",
        "Create the client certificate Secret (a cert-manager Certificate's Secret has both keys), or "
        "remove `clientCertSecretRef`.",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "HTTPSCABundleInvalid",
        "The key of `spec.tls.caBundleSecretRef` is empty or holds no PEM certificate OpenSSL loads; the "
        "message names the Secret and the key, never the content. Requeue 15 s.",
        "Put the PEM bundle of the CA that issued the HTTPS endpoints' certificates in that key.",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "KeystoneCertificateNotTrusted",
        "`spec.keystoneEndpoint` is https and one TLS handshake (nothing sent) found its certificate not "
        "verified by the bundle of `spec.tls.caBundleSecretRef` (unset: the system's CAs), so no pod "
        "could authenticate; the pass stops here. Not checked while `spec.tls` is unset and `extraConfig` "
        "sets `[keystone_authtoken] cafile`; an unreachable Keystone is no verdict. Requeue 15 s.",
        "Set `spec.tls.caBundleSecretRef` to a bundle of the CA that issued Keystone's certificate (or "
        "add that CA to the bundle).",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "WaitingForCacheTLS",
        "`spec.cache.tls` is set and the Secret of `caBundleSecretRef` (key default `ca.crt`) or of "
        "`clientCertSecretRef` (`tls.crt` and `tls.key`) is missing or lacks its keys; the message names "
        "which. Requeue 15 s.",
        "Create the Secret the message names, or remove `spec.cache.tls`.",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "WaitingForMessagingCredentials",
        "The RabbitmqCluster of `spec.messaging.clusterRef` is missing, not Ready yet, or its default-user "
        "Secret (named by its status) is missing or incomplete; or the Secret of `spec.messaging.secretRef` "
        "has no non-empty key (default `transport_url`). The message says which. Requeue 15 s.",
        "`kubectl get rabbitmqcluster <name> -o yaml`: wait for the RabbitMQ cluster operator, or fix the "
        "cluster it reports; or write the URL Secret.",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "TransportURLRejected",
        "The transport URL (from `spec.messaging.secretRef`, or built for the RabbitmqCluster) cannot fill "
        "the cell mapping's URL template: no `rabbit://` scheme, no host, or no explicit port on the last "
        "host (the message says which, never the URL).",
        "Fix the URL in the Secret (for example `rabbit://user:pass@host:5672/`), or the RabbitmqCluster's "
        "service.",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "CredentialNotRepresentable",
        "A credential holds a backslash directly before a `$`, which oslo.config cannot read back literally "
        "(it would expand `$name`). The message names the Secret and key, never the value.",
        "Change that password (in the Secret and wherever it is used) to one without a backslash before a "
        "`$`.",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "SecretRefNotLabelled",
        "The operator runs with `--secret-ref-label` and a Secret the spec names (the message names the "
        "field and the Secret) does not carry that label, or does not exist yet, so the operator does not "
        "use it: nothing of it is copied for the pods, which keep the last labelled content "
        "(`{name}-checked-*`). Requeue 15 s; creating or labelling the Secret wakes the Nova at once.",
        "Label the Secret (`kubectl label secret <name> <key>=<value>`) if this Nova may use it, or name "
        'another one. See docs/install.md, "What a CR author can make the operator read".',
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "WaitingForSecretConfig",
        "The Secret of `spec.secretConfig.secretRef` does not exist or has no key. Requeue 15 s.",
        "Create it with one key per option, named `section.option` (for example `vault.root_token_id`).",
    ),
    _nova(
        c.SECRETS_READY,
        "False",
        "SecretConfigInvalid",
        "A key of the `spec.secretConfig.secretRef` Secret is not `section.option`, names no option of "
        "the release's catalog, names one the operator sets from the spec, or its value holds a "
        "backslash before a `$`. The message names the keys, never a value. Requeue 15 s.",
        "Rename or remove those keys (the operator's own options are set through their spec fields).",
    ),
    # -- ComputeConfigReady -------------------------------------------------------------------
    _nova(
        c.COMPUTE_CONFIG_READY,
        "True",
        "ComputeConfigPublished",
        "The compute contract Secret (`status.computeConfigSecretRef`) is written; NovaCompute pools read "
        "it.",
        _NOTHING,
    ),
    _nova(
        c.COMPUTE_CONFIG_READY,
        "False",
        "ComputeConfigError",
        "The compute contract could not be rendered or written (the message says which; credentials are "
        "redacted).",
        "Fix what the message names (for a refused write, see the API server's reason); the error is "
        "retried with backoff.",
    ),
    _nova(
        c.COMPUTE_CONFIG_READY,
        "False",
        "WaitingForRemoteTransportURL",
        "`spec.remoteCompute` is set but the Secret of its `transportURLSecretRef` is missing or lacks "
        "its key.",
        "Create the transport URL Secret for the remote compute cluster, or remove `spec.remoteCompute`.",
    ),
    # -- DatabaseReady ------------------------------------------------------------------------
    _nova(
        c.DATABASE_READY,
        "True",
        "DatabaseSynced",
        "The schemas match `status.installedRelease` (db-sync done, or the upgrade finished).",
        _NOTHING,
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "ClusterNotReady",
        "The MariaDB of `clusterRef` (database or apiDatabase) is missing or not Ready. Requeue 30 s; "
        "pauses an upgrade in any phase.",
        "`kubectl get mariadb <name>`: wait for the MariaDB operator, or fix the cluster it reports.",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "WaitingForDatabase",
        "A MariaDB Database, User or Grant the operator created is not Ready yet (the message lists them). "
        "Requeue 30 s.",
        "`kubectl get databases,users,grants -l app.kubernetes.io/instance=<nova>`; the MariaDB operator's "
        "status on them says why.",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "WaitingForConfig",
        "The config ConfigMap the db-sync Job mounts is not written yet (SecretsReady is not True).",
        "Look at `SecretsReady` first: it carries the cause.",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "ImageReleaseMismatch",
        "The tag of `spec.image` names another release than `spec.openStackRelease` (lockstep check). "
        "Nothing "
        "is rolled or migrated. Requeue 30 s.",
        "Change both fields together (`spec.openStackRelease` and `spec.image.tag`); a digest-pinned image "
        "or a non-release tag is not checked.",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "UpgradeHeldByPolicy",
        "`spec.openStackRelease` asks for an upgrade, but `spec.policy` names a rule the target release's "
        "nova does not register (it drops it, or never had it), or its ConfigMap cannot be read. Nothing is "
        "rolled or migrated; `SecretsReady` (`ConfigError`) names the rules. Requeue 30 s.",
        "Rename or remove the rules the message names (see the target release's policy reference), or set "
        "`spec.openStackRelease` back; the change wakes the Nova.",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "DBSyncInProgress",
        "The `{name}-db-sync` Job is running (first install, or a changed config/image). A pod of it "
        "that cannot start is named in the message with its waiting reason (`ErrImagePull`, "
        "`CreateContainerConfigError`, ...) and image.",
        "Nothing; `kubectl logs job/<nova>-db-sync` shows its progress. A named pod: `kubectl describe pod "
        "<pod>` shows the kubelet's message (a missing image or Secret key).",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "DBSyncFailed",
        "The `{name}-db-sync` Job failed (backoff limit reached). Warning event `DBSyncFailed`; the alert "
        "`NovaDBSyncFailed` fires.",
        "`kubectl logs job/<nova>-db-sync` (usually: database unreachable, wrong credentials, or a "
        "schema left by another release). After fixing the cause delete the Job: the next pass creates it "
        "again.",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "VersionParseError",
        "`spec.openStackRelease` or `status.installedRelease` is not a release of the form YYYY.N. Warning "
        "event; the step fails (backoff).",
        "Fix `spec.openStackRelease`.",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "DowngradeNotSupported",
        "`spec.openStackRelease` is older than `status.installedRelease`. Warning event; nothing is changed.",
        "Set `spec.openStackRelease` back to `status.installedRelease` (restore a database backup to go "
        "back).",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "UpgradePathInvalid",
        "The new release is not the next one after `status.installedRelease` (a skip-level jump). Warning "
        "event.",
        "Step one release at a time (the message names the next release).",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "UpgradeTargetChanged",
        "`spec.openStackRelease` changed to a third release during an upgrade; the upgrade neither advances "
        "nor restarts. Warning event.",
        "Set it to `status.targetRelease` to continue or to `status.installedRelease` to abort.",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "ExpandInProgress",
        "Upgrade phase `Expanding`: the `{name}-db-expand` Job runs the pre-flight `nova-status upgrade "
        "check` "
        "and then the additive schema changes. A pod of the Job that cannot start is named in the message "
        "(its waiting reason and image).",
        "Nothing; watch `status.upgradePhase` and the `UpgradeCheckCompleted`/`UpgradeCheckWarnings` event. "
        "A named pod in `ErrImagePull`: the new release's image cannot be pulled (`kubectl describe pod`).",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "MigrateInProgress",
        "Upgrade phase `Migrating`: the `{name}-db-migrate` Job runs the online data migrations. A pod "
        "of the Job that cannot start is named in the message (its waiting reason and image).",
        "Nothing, unless a pod is named: `kubectl describe pod <pod>`.",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "UpgradeRollingUpdate",
        "Upgrade phase `RollingUpdate`: every role is rolling out the new image; the contract waits for all "
        "of them.",
        "If it stays: the role's own condition (`WaitingFor<Role>`, `WaitingForDeployment`) names the "
        "Deployment; fix the rollout or abort the upgrade.",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "ContractInProgress",
        "Upgrade phase `Contracting`: the `{name}-db-contract` Job removes what the old release needed. A "
        "pod of the Job that cannot start is named in the message (its waiting reason and image).",
        "Nothing; an abort is no longer guaranteed safe from here.",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "ExpandFailed",
        "The `{name}-db-expand` Job failed; a pre-flight check that failed (exit 2 or more) ends here too. "
        "Warning event.",
        "`kubectl logs job/<nova>-db-expand`. A failed pre-flight usually means cells not mapped because "
        "db-sync never completed: abort (set the release back), let db-sync complete, upgrade again. "
        "Otherwise fix the cause and delete the failed Job; the next pass re-creates it.",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "MigrateFailed",
        "The `{name}-db-migrate` Job failed. Warning event.",
        "`kubectl logs job/<nova>-db-migrate`; fix the cause and delete the Job (re-created), or abort.",
    ),
    _nova(
        c.DATABASE_READY,
        "False",
        "ContractFailed",
        "The `{name}-db-contract` Job failed. Warning event.",
        "`kubectl logs job/<nova>-db-contract`; fix the cause and delete the Job (re-created). Do not abort "
        "without validating both databases.",
    ),
    # -- the roles, the API Deployment ---------------------------------------------------------
    *_roles(),
    _nova(
        c.CONSOLE_PROXY_READY,
        "True",
        "ConsoleProxyDisabled",
        "`spec.consoleProxy.enabled` is false: no console proxy runs.",
        _NOTHING,
    ),
    _nova(
        c.DEPLOYMENT_READY, "True", "DeploymentReady", "The compute API Deployment is available.", _NOTHING
    ),
    _nova(
        c.DEPLOYMENT_READY,
        "False",
        "WaitingForDeployment",
        "The compute API Deployment is not available yet, its PriorityClass "
        "(`spec.api.deployment.priorityClassName`) does not exist, or (during an upgrade) it waits for every "
        "role to roll out before the contract. Polls every 10 s. A pod of the Deployment (or, before the "
        "contract, of a role) that cannot start is named with its waiting reason and image.",
        "`kubectl describe deployment <nova>`: pods pending, image pull errors, failing probes on port 8774.",
    ),
    # -- DBArchiveReady -----------------------------------------------------------------------
    _nova(
        c.DB_ARCHIVE_READY,
        "True",
        "DBArchiveScheduled",
        "The `{name}-db-archive` CronJob is applied and its last run did not fail.",
        _NOTHING,
    ),
    _nova(
        c.DB_ARCHIVE_READY,
        "True",
        "DBArchiveSuspended",
        "`spec.dbArchive.suspend` is set: the CronJob exists but nothing is archived.",
        "Unsuspend when the database must shrink again.",
    ),
    _nova(
        c.DB_ARCHIVE_READY,
        "False",
        "DBArchiveJobFailed",
        "The latest db-archive run failed; the alert `NovaDBArchiveFailed` fires.",
        "`kubectl logs job/<the failed run>` (`kubectl get jobs -l app.kubernetes.io/instance=<nova>`); "
        "soft-deleted rows keep accumulating until a run succeeds; the next scheduled run retries.",
    ),
    # -- NovaAPIReady -------------------------------------------------------------------------
    _nova(c.NOVA_API_READY, "True", "APIHealthy", "A GET on the compute API's endpoint answered.", _NOTHING),
    _nova(
        c.NOVA_API_READY,
        "False",
        "APIUnhealthy",
        "The compute API answered with a status other than 2xx; a redirect (3xx) counts, it is never "
        "followed. The message gives the code and its standard phrase, never the answer's body.",
        "`kubectl logs deployment/<nova>`: database, Keystone (`spec.keystoneEndpoint`) or message-bus "
        "errors are the usual causes.",
    ),
    _nova(
        c.NOVA_API_READY,
        "False",
        "EndpointNotReady",
        "`status.endpoint` is not set yet: the Service is not created.",
        "Look at the earlier conditions; it follows once the Deployment step ran.",
    ),
    _nova(
        c.NOVA_API_READY,
        "False",
        "HealthCheckTimeout",
        "The compute API did not send its status line and headers within 10 s (a server that trickles "
        "them is cut off at 10 s too).",
        "Check the API pods' load and logs; an operator outside the cluster needs `--nova-api-url`.",
    ),
    _nova(
        c.NOVA_API_READY,
        "False",
        "ConnectionFailed",
        "The operator could not connect to the compute API (refused, DNS, TLS).",
        "Check the Service and its endpoints; an operator outside the cluster needs `--nova-api-url`; a "
        "NetworkPolicy must let the operator reach port 8774.",
    ),
    _nova(
        c.NOVA_API_READY,
        "False",
        "HealthCheckFailed",
        "The health check failed in another way (the message says how).",
        "Read the message and the operator's log line of the same reconcile id.",
    ),
    # -- optional features --------------------------------------------------------------------
    _nova(
        c.HPA_READY,
        "True",
        "HPAReady",
        "The HorizontalPodAutoscaler of the compute API is applied.",
        _NOTHING,
    ),
    _nova(c.HPA_READY, "True", "HPANotRequired", "`spec.autoscaling` is not set.", _NOTHING),
    _nova(c.NETWORK_POLICY_READY, "True", "NetworkPolicyReady", "The NetworkPolicies are applied.", _NOTHING),
    _nova(
        c.NETWORK_POLICY_READY,
        "True",
        "NetworkPolicyNotRequired",
        "`spec.networkPolicy` is not set.",
        _NOTHING,
    ),
    _nova(_ROUTES, "True", "HTTPRouteAccepted", "The HTTPRoute is accepted by a parent Gateway.", _NOTHING),
    _nova(_ROUTES, "True", "HTTPRouteNotRequired", "No gateway block is set for this endpoint.", _NOTHING),
    _nova(
        _ROUTES,
        "False",
        "HTTPRouteNotAccepted",
        "The HTTPRoute exists but no parent Gateway has accepted it yet.",
        "`kubectl describe httproute <name>`: the Gateway's status says why (wrong `parentRef`, listener "
        "hostname, allowed routes).",
    ),
    _nova(
        _ROUTES,
        "False",
        "GatewayAPINotInstalled",
        "A gateway block is set but the cluster does not serve `gateway.networking.k8s.io/v1` HTTPRoute.",
        "Install the Gateway API CRDs and restart the operator (it probes the served kinds when it starts), "
        "or remove the gateway block.",
    ),
    # -- informational, aggregate -------------------------------------------------------------
    _nova(
        c.EXTRA_CONFIG_HEALTHY,
        "True",
        "NoOwnedKeysOverridden",
        "`spec.extraConfig` overrides no operator-owned key.",
        _NOTHING,
    ),
    _nova(
        c.EXTRA_CONFIG_HEALTHY,
        "False",
        "OwnedKeysOverridden",
        "`spec.extraConfig` overrides keys the operator renders from the spec (the message lists them); the "
        "override is honoured. Not part of `Ready`. Warning event `ExtraConfigOwnedKeyOverride`.",
        "Prefer the spec field that owns the key; keep the override only if you mean it.",
    ),
    _nova(
        c.SERVICE_RECORDS_HEALTHY,
        "True",
        "NoStaleServiceRecords",
        "No service record of a gone control-plane pod is listed by Nova: each one found was deleted (Normal "
        "event `StaleServiceDeleted`, metric `nova_operator_stale_services_deleted_total`). Not part of "
        "`Ready`. Looked at again when a role's Deployment changes, never in steady state.",
        _NOTHING,
    ),
    _nova(
        c.SERVICE_RECORDS_HEALTHY,
        "False",
        "WaitingForServicesDown",
        "A rollout or scale-down left service records of scheduler or conductor pods that are gone (or "
        "still terminating) and Nova still reports them up: a record turns down `service_down_time` (60 s) "
        "after its pod's last heartbeat and is deleted then. The message names them; looked at every 30 s. "
        "Not part of `Ready`.",
        "Nothing; it clears by itself about a minute after the pods went. If it stays, a process of that "
        "name still heartbeats somewhere (a pod force-deleted on a node that is cut off).",
    ),
    _nova(
        c.SERVICE_RECORDS_HEALTHY,
        "False",
        "DeletingStaleServiceRecords",
        "Nova lists more stale service records of gone control-plane pods than one pass deletes (20 at "
        "most, each with its `StaleServiceDeleted` event): the message says how many were deleted and how "
        "many are left; the next look follows after about a second. Not part of `Ready`.",
        "Nothing; it clears once the last stale record is gone. A long stay means something registers "
        "records as fast as they are deleted.",
    ),
    _nova(
        c.SERVICE_RECORDS_HEALTHY,
        "False",
        "ComputeAPIError",
        "The Keystone token or a compute API call (list or delete services) failed (the message says "
        "which, with the HTTP code, `timed out` or `the certificate of <host> is not trusted`, never the "
        "answer's body), so records of gone pods are not cleaned up for now. Looked at again after 30 s, "
        "doubling to 10 min, and when a role Deployment changes at least 30 s after the failed look. Not "
        "part of `Ready`.",
        "Check `spec.keystoneEndpoint`, the service user's password and admin role, and `NovaAPIReady`; an "
        "operator running outside the cluster needs `--nova-api-url`; an untrusted certificate needs "
        "`spec.tls.caBundleSecretRef` naming the CA that issued it.",
    ),
    _nova(
        c.SERVICE_RECORDS_HEALTHY,
        "False",
        "PodListError",
        "Listing the Nova's pods (to tell a gone pod's record from a live one's) failed; nothing was "
        "deleted. Looked at again after 30 s, doubling to 10 min, and when a role Deployment changes at "
        "least 30 s after the failed look. Not part of `Ready`.",
        "Check the API server and the operator's RBAC on pods (`list`).",
    ),
    _nova(c.READY, "True", c.REASON_ALL_READY, "Every one of the fifteen sub-conditions is True.", _NOTHING),
    _nova(
        c.READY,
        "False",
        c.REASON_NOT_ALL_READY,
        "At least one sub-condition is missing or not True; the message lists them in pipeline order.",
        "Look at the first one listed: the later ones often only wait for it. The alert `NovaNotReady` "
        "fires after 15 min.",
    ),
    # -- any step -----------------------------------------------------------------------------
    _nova(
        ANY_NOVA_STEP,
        "False",
        "ChildRejected",
        "The API server refused (400/422) an object the step writes: a spec value the CRD admits but the "
        "child kind does not. Not retried; the message carries the API server's words.",
        "Fix the spec field the message points at; the spec change wakes the Nova.",
    ),
    _nova(
        ANY_NOVA_STEP,
        "False",
        "ChildOwnedByAnother",
        "An object with the name of one of the step's children exists and is not this Nova's: another "
        "Nova controls it (two Novas whose derived names meet, e.g. the cell0 Database "
        "`<name>-<database>-cell0` of Nova `x` with database `a_nova` and Nova `x-a` with database `nova`), "
        "another controller does, or it has no owner and not this Nova's labels (a Service `web` someone "
        "created before Nova `web`). The operator neither changes, adopts nor deletes it (also not when the "
        "Nova is deleted) and looks again every 60 s. The message names the object and says that another "
        "owner controls it, never which one (a tenant learns nothing of another's objects from it).",
        "Delete the object if it is stale; otherwise recreate the Nova under a name whose children do not "
        'meet it (see "Names two CRs can share" at the end of this page).',
    ),
    _nova(
        ANY_NOVA_STEP,
        "False",
        "SecretNotText",
        "A referenced Secret's key holds bytes that are not UTF-8 text (the message names the Secret and "
        "key).",
        "Write the value as text (base64 of the UTF-8 string in `data`, or `stringData`).",
    ),
    _nova(
        ANY_NOVA_STEP,
        "False",
        "SecretTooLarge",
        "A Secret the step reads holds more than 256 KiB of data (decoded, all keys): the operator neither "
        "caches nor uses it (the message names the Secret, its size and the limit, never its content). "
        "Looked at again after 60 s and when the Secret changes.",
        "Keep only the keys the Nova needs in that Secret (a few KiB); a CA bundle larger than 256 KiB "
        "belongs in a Secret of its own, trimmed to the CAs that sign the servers.",
    ),
    _nova(
        (c.SECRETS_READY, c.DATABASE_READY, c.DB_ARCHIVE_READY, ANY_NOVA_STEP),
        "False",
        "ConfigError",
        "On `SecretsReady`: the configuration could not be rendered or written (an `spec.extraConfig` "
        "option was refused: unknown to the release's option catalog or a value nova would not accept; a "
        "`spec.policy` rule the release's nova does not register, or its ConfigMap or key missing; or "
        "the config ConfigMap could not be applied); a running Nova keeps its last good config. On "
        "`DatabaseReady`/`DBArchiveReady`: the Job's PriorityClass (`spec.jobs.priorityClassName`) does not "
        'exist. On any step: a rule only the model checks failed ("the spec is invalid: ...", Warning '
        "event `InvalidSpec`); steps that do not consume the field go on. Warning event `ConfigError` once "
        "per distinct problem.",
        "Read the message: it names the field, section or option. Fix the spec (or create the "
        "PriorityClass); the change wakes the Nova and the next pass renders again.",
    ),
)


NOVACOMPUTE: Final[tuple[Reason, ...]] = (
    # -- NovaReady ----------------------------------------------------------------------------
    _pool(
        c.NOVA_REF_READY,
        "True",
        "NovaResolved",
        "The Nova of `spec.novaRef` is found and publishes its contract.",
        _NOTHING,
    ),
    _pool(
        c.NOVA_REF_READY,
        "False",
        "NovaNotFound",
        "No Nova of that name in the pool's namespace. Requeue 15 s.",
        "Fix `spec.novaRef.name`, or create the Nova first.",
    ),
    _pool(
        c.NOVA_REF_READY,
        "False",
        "WaitingForInstalledRelease",
        "The Nova has no `status.installedRelease` yet (its first db-sync has not completed).",
        "Look at the Nova's `DatabaseReady`.",
    ),
    _pool(
        c.NOVA_REF_READY,
        "False",
        "ComputeConfigNotPublished",
        "The Nova has not published its compute contract (`status.computeConfigSecretRef`).",
        "Look at the Nova's `ComputeConfigReady`.",
    ),
    _pool(
        c.NOVA_REF_READY,
        "False",
        "WaitingForServiceUserSecret",
        "The Nova's service-user Secret is missing or its key is empty.",
        "Create it as for the Nova's `WaitingForServiceUserCredentials`.",
    ),
    _pool(
        c.NOVA_REF_READY,
        "False",
        "SecretNotText",
        "The service-user Secret's key holds bytes that are not UTF-8 text.",
        "Write the password as text.",
    ),
    _pool(
        c.NOVA_REF_READY,
        "False",
        "NovaError",
        "Reading the Nova or its Secret failed with an API error other than NotFound; retried with backoff.",
        "Check the operator's RBAC and the API server.",
    ),
    # -- NodesReady ---------------------------------------------------------------------------
    _pool(
        c.NODES_READY,
        "True",
        "NodesResolved",
        "The node plan is made; the message counts the selected and the leaving nodes.",
        _NOTHING,
    ),
    _pool(
        c.NODES_READY,
        "False",
        "NoMatchingNodes",
        "No node matches `spec.nodeSelector` and the pool holds none.",
        "Label the nodes (`kubectl label node <n> <key>=<value>`) or fix the selector.",
    ),
    _pool(
        c.NODES_READY,
        "False",
        "NodeConflict",
        "A selected node is held by another pool of the same Nova; this pool runs no pod there. Warning "
        "event "
        "`NodeConflict` once per new conflict.",
        "Make the pools' node selectors disjoint; the node moves once its holder releases it.",
    ),
    _pool(
        c.NODES_READY,
        "False",
        "NodesForbidden",
        "The operator may not list Nodes (403). Requeue 15 s.",
        "Restore the ClusterRole grant on nodes (`config/rbac/role.yaml`, or the chart's ClusterRole; the "
        "namespaced install keeps a ClusterRole for nodes).",
    ),
    _pool(
        c.NODES_READY,
        "False",
        "NodeListError",
        "Listing Nodes failed with another API error; retried with backoff.",
        "Check the API server and the operator's log.",
    ),
    # -- ConfigReady --------------------------------------------------------------------------
    _pool(c.CONFIG_READY, "True", "ConfigRendered", "The pool's config ConfigMap is written.", _NOTHING),
    _pool(
        c.CONFIG_READY,
        "False",
        "WaitingForComputeConfig",
        "The compute contract Secret does not exist in the pool's namespace. Requeue 15 s.",
        "It is the Nova's `status.computeConfigSecretRef`; in the Nova's namespace it appears with "
        "`ComputeConfigReady`, elsewhere copy it by hand.",
    ),
    _pool(
        c.CONFIG_READY,
        "False",
        "ComputeConfigIncomplete",
        "The compute contract Secret lacks keys (the message lists them).",
        "Let the Nova rewrite it (look at its `ComputeConfigReady`), or fix the hand-made copy.",
    ),
    _pool(
        c.CONFIG_READY,
        "False",
        "WaitingForHTTPSCABundle",
        "`spec.tls` is set and its `caBundleSecretRef` Secret is missing or lacks its key (default "
        "`ca.crt`). Requeue 15 s; the Secret's arrival wakes the pool.",
        "Create the CA bundle Secret in the pool's namespace, or remove the pool's `spec.tls` (the "
        "contract's bundle, the Nova's `spec.tls`, then applies).",
    ),
    _pool(
        c.CONFIG_READY,
        "False",
        "HTTPSCABundleInvalid",
        "The key of the pool's `spec.tls.caBundleSecretRef` is empty, not text, or holds no PEM "
        "certificate OpenSSL loads; the message never quotes it. Requeue 15 s.",
        "Put the PEM bundle of the CA that issued the endpoints' certificates in that key.",
    ),
    _pool(
        c.CONFIG_READY,
        "False",
        "WaitingForDigestKey",
        "The Nova's `{name}-digest-key` Secret (key `key`) is not in the pool's namespace: the "
        "pool's `compute-config-hash` annotation is keyed with it. Requeue 15 s.",
        "The Nova's Secrets step creates it (look at its `SecretsReady`); next to a hand-made copy "
        "of the contract, copy it too.",
    ),
    _pool(
        (c.NOVA_REF_READY, c.CONFIG_READY),
        "False",
        "SecretRefNotLabelled",
        "The operator runs with `--secret-ref-label` and a Secret the pool would read (its Nova's "
        "`spec.serviceUser.secretRef`, on NovaReady; its own `spec.secretConfig.secretRef` or "
        "`spec.tls.caBundleSecretRef`, on ConfigReady) does not carry that label; the message names the "
        "field and the Secret. Nothing of it is used: the pool's pods mount its copy of its `spec.tls` "
        "bundle (`{pool}-nova-compute-checked-https-ca`), which keeps the last labelled content. "
        "Requeue 15 s.",
        'Label the Secret if the pool may use it. See docs/install.md, "What a CR author can make the '
        'operator read".',
    ),
    _pool(
        (c.NOVA_REF_READY, c.CONFIG_READY),
        "False",
        "SecretTooLarge",
        "A Secret the pool reads (its Nova's `spec.serviceUser.secretRef`, on NovaReady; the compute "
        "contract or its own `spec.secretConfig.secretRef`, on ConfigReady) holds more than 256 KiB of "
        "data: the operator neither caches nor uses it (the message names it, its size and the limit).",
        "Keep only the keys the pool needs in that Secret.",
    ),
    _pool(
        c.CONFIG_READY,
        "False",
        "WaitingForSecretConfig",
        "The Secret of the pool's `spec.secretConfig.secretRef` does not exist or has no key. Requeue 15 s.",
        "Create it with one key per option, named `section.option` (for example `libvirt.rbd_secret_uuid`).",
    ),
    _pool(
        c.CONFIG_READY,
        "False",
        "SecretConfigInvalid",
        "A key of the pool's `spec.secretConfig.secretRef` Secret is not `section.option`, names no option "
        "of the Nova's release catalog, names one the operator or the compute contract sets, or its value "
        "holds a backslash before a `$`. The message names the keys, never a value. Requeue 15 s.",
        "Rename or remove those keys.",
    ),
    _pool(
        c.CONFIG_READY,
        "False",
        "ConfigError",
        "The config could not be read, rendered or written, a `spec.extraConfig` option was refused, or the "
        "spec breaks a rule only the model checks (Warning event `InvalidSpec`). A running pool keeps its "
        "config.",
        "Read the message and fix the field it names.",
    ),
    # -- DaemonSetReady -----------------------------------------------------------------------
    _pool(
        c.DAEMONSET_READY,
        "True",
        "DaemonSetReady",
        "The pool's nova-compute DaemonSet is rolled out (also set when no node needs it and it is removed).",
        _NOTHING,
    ),
    _pool(
        c.DAEMONSET_READY,
        "False",
        "DaemonSetProgressing",
        "The DaemonSet is not rolled out on every planned node yet. A pod of it that cannot start is named "
        "with its waiting reason and image (a pod event wakes the pool).",
        "`kubectl rollout status daemonset/<name>`; with `updateStrategy: OnDelete` delete the old pods "
        "yourself.",
    ),
    _pool(
        c.DAEMONSET_READY,
        "False",
        "DaemonSetError",
        "Applying, reading or deleting the DaemonSet failed; retried with backoff.",
        "Read the message; a refused DaemonSet names the field.",
    ),
    _pool(
        c.DAEMONSET_READY,
        "False",
        "ChildOwnedByAnother",
        "A DaemonSet named `<pool>-nova-compute` exists and is not this pool's (another owner controls it, "
        "or it has no owner and not the pool's labels). The operator neither changes nor deletes it and "
        "looks again every 60 s. The message names the DaemonSet and says that another owner controls it.",
        "Delete the other DaemonSet if it is stale, or recreate the pool under another name.",
    ),
    # -- VPAReady -----------------------------------------------------------------------------
    _pool(
        c.VPA_READY,
        "True",
        "VPANotRequired",
        "No VerticalPodAutoscaler is requested (this operator offers none).",
        _NOTHING,
    ),
    # -- AggregatesReady ----------------------------------------------------------------------
    _pool(
        c.AGGREGATES_READY,
        "True",
        "AggregatesEnsured",
        "The pool's host aggregates exist in Nova; the message lists them.",
        _NOTHING,
    ),
    _pool(
        c.AGGREGATES_READY,
        "False",
        "NodesWithoutZone",
        "Nodes of the pool carry no availability-zone label; the other zones are still ensured.",
        "Label those nodes with the zone label the pool reads.",
    ),
    _pool(
        c.AGGREGATES_READY,
        "False",
        "AggregateZoneMismatch",
        "An aggregate of the pool's name exists in Nova with another availability zone.",
        "Fix or remove the aggregate in Nova (`openstack aggregate show`), or rename the zone.",
    ),
    _pool(
        c.AGGREGATES_READY,
        "False",
        "WaitingForAggregate",
        "An aggregate was created concurrently by somebody else; the pool looks again in 10 s.",
        _NOTHING,
    ),
    _pool(
        (c.AGGREGATES_READY, c.SERVICES_READY),
        "False",
        "ComputeAPIError",
        "A Keystone or Nova API call failed (the message says which, with the HTTP code or `timed out`, "
        "`answer larger than`, `the certificate of <host> is not trusted`, never the answer's body; a "
        "redirect is an error); retried every 30 s.",
        "Check `spec.keystoneEndpoint`, the service user's password and the Nova's `NovaAPIReady`; an "
        "untrusted certificate needs the Nova's `spec.tls.caBundleSecretRef`.",
    ),
    # -- ServicesReady ------------------------------------------------------------------------
    _pool(c.SERVICES_READY, "True", "ServicesUp", "Every compute service of the pool is up.", _NOTHING),
    _pool(
        c.SERVICES_READY,
        "True",
        "Draining",
        "Nodes are leaving the pool: their services are disabled and the pool waits for their servers to "
        "move; the message names them.",
        "Migrate or delete the servers on those nodes; the release follows on its own.",
    ),
    _pool(
        c.SERVICES_READY,
        "False",
        "WaitingForServices",
        "No compute service is registered yet on the named nodes.",
        "Check the nova-compute pods on those nodes (`kubectl logs`); registration needs the message bus and "
        "the API database.",
    ),
    _pool(
        c.SERVICES_READY,
        "False",
        "WaitingForHostMapping",
        "A compute service is registered but its host is not mapped to cell1 yet; host discovery runs every "
        "300 s (and the pool starts a discovery Job).",
        "Wait; if it stays, see `HostDiscoveryError` and the discovery Job's logs.",
    ),
    _pool(
        c.SERVICES_READY,
        "False",
        "HostDiscoveryError",
        "Starting or reading the host-discovery Job failed.",
        "Read the message and the Job's logs.",
    ),
    _pool(
        c.SERVICES_READY,
        "False",
        "ServicesDown",
        "Compute services of the pool are down (the message names the hosts).",
        "Check nova-compute on those nodes: pod status, logs, libvirt.",
    ),
    _pool(
        c.SERVICES_READY,
        "False",
        "PodListError",
        "Listing the pool's pods failed; retried with backoff.",
        "Check the API server and the operator's RBAC on pods.",
    ),
    # -- informational, aggregate -------------------------------------------------------------
    _pool(
        c.EXTRA_CONFIG_HEALTHY,
        "True",
        "NoOwnedKeysOverridden",
        "`spec.extraConfig` overrides no reported libvirt key.",
        _NOTHING,
    ),
    _pool(
        c.EXTRA_CONFIG_HEALTHY,
        "False",
        "OwnedKeysOverridden",
        "`spec.extraConfig` overrides keys the operator sets; honoured. Warning event "
        "`ExtraConfigOwnedKeyOverride`.",
        "Keep the override only if you mean it.",
    ),
    _pool(c.READY, "True", c.REASON_ALL_READY, "Every one of the seven sub-conditions is True.", _NOTHING),
    _pool(
        c.READY,
        "False",
        c.REASON_NOT_ALL_READY,
        "At least one sub-condition is missing or not True; the message lists them.",
        "Look at the first one listed.",
    ),
)

REASONS: Final[tuple[Reason, ...]] = NOVA + NOVACOMPUTE
