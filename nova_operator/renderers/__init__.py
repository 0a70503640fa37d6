"""Pure renderers: (Nova, a few inputs) -> config text or manifest dicts; no I/O, no clock, no randomness.

What a Nova pass renders, and from what (``nova`` is a defaulted ``models.nova.Nova``):

- config ConfigMap data: ``novaconf.config_data(novaconf.conf_inputs(nova))`` (raises ConfigError)
- ``{name}-config-<hash>``: ``novaconf.config_map(nova, data)`` (immutable, name from the content)
- ExtraConfigHealthy input: ``novaconf.overridden_owned_keys(extra)``; catalog scan:
  ``catalog.unknown_options(release, extra, exempt=novaconf.OWNED_PAIRS)``
- ``nova-compute.conf``: ``novaconf.render_compute_fragment(inputs[, remote=RemoteComputeInputs(..)])``
- DSN Secrets: ``secrets.database_dsn(nova, "api"|"cell", username=, password=)`` then
  ``secrets.dsn_secret(nova, which, dsn)``
- transport URL Secret: ``secrets.managed_transport_url(...)`` / the brownfield value, checked by
  ``secrets.check_transport_url(url)`` (returns the broker port), then
  ``secrets.transport_url_secret(nova, url)``
- ``--secret-ref-label``'s copies of the Secrets pods mount by name (``pod_env.mounted_secrets``):
  ``secrets.checked_copy_secret(nova, which, data)``; the pods mount them with ``checked``
  (``WorkloadInputs.checked_copies``, ``checked=`` of the Job renderers)
- compute contracts: ``secrets.compute_config_secret(nova, fragment=, transport_url=, password=,
  metadata_secret=, ca_crt=, remote=)``
- five Deployments: ``workload.deployments(nova, WorkloadInputs(config_map, digests, broker_port))``
  or ``workload.deployment(nova, Component.X, inputs)``
- three Services: ``service.services(nova)``
- PodDisruptionBudget: ``pdb.pdb(nova)``
- HorizontalPodAutoscaler: ``hpa.hpa(nova)`` (None while ``spec.autoscaling`` is unset)
- NetworkPolicies: ``network_policy.network_policies(nova, operator_namespace=, broker_port=)``
- HTTPRoutes: ``http_route.http_routes(nova)``
- db-sync Job: ``jobs.db_sync_job(nova, config_map, checked=)``
- expand / migrate / contract: ``jobs.phase_job(nova, "db-expand"|"db-migrate"|"db-contract", config_map,
  checked=)``
- db-archive CronJob: ``jobs.db_archive_cronjob(nova, config_map, checked=)``
- MariaDB Database/User/Grant: ``mariadb.mariadb_objects(nova)`` (creation order; empty when brownfield)

Manifests carry no owner references (the apply layer adds them) and are plain JSON data
(no object shared between two places), so a caller may mutate what it gets.
"""
