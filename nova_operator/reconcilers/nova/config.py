"""Step 4, ``Config`` (``SecretsReady`` on failure; maintains ``ExtraConfigHealthy``), reconciler.md §4.4.

Renders nova.conf and the four role overlays into the immutable, content-addressed
``{name}-config-<hash>`` ConfigMap and prunes older ones to the 3 newest historical.

A config that cannot be rendered (a newline in a value, a key the option catalog of the
release does not know, an option nova marks secret (its way in is ``spec.secretConfig``), a
rejected key) is not written: ``SecretsReady=False`` reason
``ConfigError`` with a Warning event of the same reason, and the step hands forward the
ConfigMap the live API Deployment mounts, so running pods keep their last-good config (on a
first install there is none and the Database step waits with ``WaitingForConfig``).
Choice: an unknown option fails the Config step like the upstream webhook refused it at
admission, so ``Ready`` cannot stay True at a generation whose config was never applied.

``spec.policy`` (issue 38 item 3) is rendered into ``policy.yaml`` and the ``policy.conf``
overlay, in a content-addressed ConfigMap of its own, ``{name}-policy-<hash>`` (pruned the same
way), that only the API and metadata pods mount: a policy change rolls those two, and neither the
other roles nor db-sync (whose config ConfigMap does not change). A rule name the release's nova
does not register (the policy-rule catalog, ``nova_operator.policy_catalog``) fails the step the
same way as a bad config, naming the rule, and so do a missing policy ConfigMap or key. When a
changed config is written, a rule the next shipped release drops is warned about
(``PolicyWarning``).
"""

from __future__ import annotations

from typing import Final

from nova_operator import catalog, conditions, naming, policy_catalog
from nova_operator.decisions import releases, retention
from nova_operator.kube.errors import KubeError
from nova_operator.kube.resources import CONFIGMAPS, DEPLOYMENTS
from nova_operator.models.nova import POLICY_KEY_DEFAULT
from nova_operator.naming import Component
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.renderers import novaconf
from nova_operator.runtime.request import Result

CONDITION: Final = conditions.SECRETS_READY
CONFIG_ERROR: Final = "ConfigError"
NO_OWNED_KEYS_OVERRIDDEN: Final = "NoOwnedKeysOverridden"
OWNED_KEYS_OVERRIDDEN: Final = "OwnedKeysOverridden"
OWNED_KEY_OVERRIDE_EVENT: Final = "ExtraConfigOwnedKeyOverride"
EXTRA_CONFIG_WARNING: Final = "ExtraConfigWarning"  # a deprecated option, or no catalog to check against
POLICY_WARNING: Final = "PolicyWarning"  # a rule in use that the next release drops
KEEP_HISTORICAL: Final = 3


def _extra_config(ctx: PassContext) -> dict[str, dict[str, str]]:
    return {s: dict(opts) for s, opts in (ctx.nova.spec.extra_config or {}).items()}


async def _extra_config_health(ctx: PassContext, extra: dict[str, dict[str, str]]) -> None:
    overridden = novaconf.overridden_owned_keys(extra)
    if not overridden:
        ctx.set(
            conditions.EXTRA_CONFIG_HEALTHY,
            True,
            NO_OWNED_KEYS_OVERRIDDEN,
            "No operator-owned key is overridden",
        )
        return
    listed = ", ".join(f"[{s}] {k}" for s, k in overridden)
    message = (
        f"spec.extraConfig overrides operator-owned keys: {listed}; the operator renders them from the spec, "
        "and the override is honoured"
    )
    previous = ctx.condition(conditions.EXTRA_CONFIG_HEALTHY)
    changed = previous is None or previous.get("status") != "False" or previous.get("message") != message
    ctx.set(conditions.EXTRA_CONFIG_HEALTHY, False, OWNED_KEYS_OVERRIDDEN, message)
    if changed:
        await ctx.emit("Warning", OWNED_KEY_OVERRIDE_EVENT, message)


def _catalog_problems(ctx: PassContext, extra: dict[str, dict[str, str]]) -> list[str]:
    owned = [(s, k) for s, keys in novaconf.OWNED_KEYS.items() for k in keys]
    release = releases.base(ctx.nova.spec.open_stack_release)
    return catalog.extra_config_problems(release, extra, exempt=owned, exempt_secret=novaconf.OWNED_PAIRS)


async def _policy(ctx: PassContext) -> tuple[dict[str, str] | None, str, list[str]]:
    """spec.policy's rules (None: unset), where they come from, and what stops them being used.

    The rules of ``configMapRef`` are read from the ConfigMap, which the policy ConfigMaps cache
    holds (``policy_reads``: no request once cached); a missing ConfigMap or key, or a file that is
    not a mapping of rule names to check strings, is a problem naming the ConfigMap and the key.
    """
    policy = ctx.nova.spec.policy
    if policy is None:
        return None, "", []
    if policy.rules is not None:
        return dict(policy.rules), "spec.policy.rules", []
    ref = policy.config_map_ref
    assert ref is not None  # the CRD admits exactly one of the two
    key = ref.key or POLICY_KEY_DEFAULT
    source = f"spec.policy.configMapRef (ConfigMap {ref.name}, key {key})"
    found = await ctx.named(CONFIGMAPS, ref.name)
    if found is None:
        return {}, source, [f"{source}: the ConfigMap does not exist in namespace {ctx.namespace}"]
    data = found.get("data") or {}
    if key not in data:
        return {}, source, [f"{source}: the ConfigMap has no key {key}"]
    rules, problems = policy_catalog.parse_policy_file(str(data[key]), source=source)
    return rules, source, problems


def _policy_problems(ctx: PassContext, rules: dict[str, str], source: str) -> list[str]:
    release = releases.base(ctx.nova.spec.open_stack_release)
    installed = releases.base(str(ctx.status.get("installedRelease") or "")) or ""
    return policy_catalog.policy_problems(release, rules, source=source, installed=installed)


async def _last_good(ctx: PassContext) -> None:
    """Hand forward the config and policy ConfigMaps the live API Deployment mounts (none on a first
    install, nor one that is gone)."""
    api = ctx.cached(DEPLOYMENTS, naming.deployment_name(ctx.name, Component.API))
    volumes = (((api or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("volumes") or []

    def mounted(volume: str) -> str:
        name = next(
            (v["configMap"]["name"] for v in volumes if v.get("name") == volume and "configMap" in v), ""
        )
        return name if name and ctx.cached(CONFIGMAPS, name) is not None else ""

    ctx.state.config_map = mounted("config")
    ctx.state.policy_map = mounted("policy")


async def _fail(ctx: PassContext, message: str) -> Result:
    previous = ctx.initial_condition(CONDITION)
    repeated = previous is not None and (previous.get("reason"), previous.get("message")) == (
        CONFIG_ERROR,
        message,
    )
    ctx.set(CONDITION, False, CONFIG_ERROR, message)
    if not repeated:  # once per distinct problem, so a refused config does not flood the namespace
        await ctx.emit("Warning", CONFIG_ERROR, message)
    await _last_good(ctx)
    return Result()


async def _prune(ctx: PassContext, current: str, base: str = "config") -> None:
    """Keep the current ``{name}-{base}-*`` ConfigMap and the 3 newest historical ones this CR owns;
    delete the rest (``current`` "": the newest 3 stay)."""
    labels = {naming.CONFIG_BASE_LABEL: naming.config_base_label(ctx.name, base)}
    for name in retention.surplus(ctx.owned(CONFIGMAPS, labels), current, KEEP_HISTORICAL):
        await ctx.remove(CONFIGMAPS, name)


async def reconcile_config(ctx: PassContext) -> Result:
    extra = _extra_config(ctx)
    await _extra_config_health(ctx, extra)
    rules, source, policy_problems = await _policy(ctx)
    if rules is not None and not policy_problems:
        policy_problems = _policy_problems(ctx, rules, source)
    ctx.state.policy_held = tuple(policy_problems)  # the Database step starts no upgrade while set
    if problems := [*_catalog_problems(ctx, extra), *policy_problems]:
        return await _fail(ctx, "; ".join(problems))
    try:
        inputs = novaconf.conf_inputs(ctx.nova, policy_from_config_map=rules)
        desired = novaconf.config_map(ctx.nova, novaconf.config_data(inputs))
        policy_data = novaconf.policy_data(inputs)
        policy = novaconf.policy_map(ctx.nova, policy_data) if policy_data else None
    except novaconf.ConfigError as exc:
        return await _fail(ctx, str(exc))
    written = [d for d in (desired, policy) if d is not None]
    new_config = any(ctx.cached(CONFIGMAPS, d["metadata"]["name"]) is None for d in written)
    try:
        for each in written:
            await ctx.ensure(each)
        await _prune(ctx, desired["metadata"]["name"])
        await _prune(ctx, policy["metadata"]["name"] if policy else "", "policy")
    except KubeError as exc:
        ctx.set(CONDITION, False, CONFIG_ERROR, f"config ConfigMap: {exc}")
        raise
    ctx.state.config_map = desired["metadata"]["name"]
    ctx.state.policy_map = policy["metadata"]["name"] if policy else ""
    if new_config and (release := releases.base(ctx.nova.spec.open_stack_release)) is not None:
        # admission warnings without a webhook: events, once, when a changed config is written
        for warning in catalog.admission_warnings(release, extra):
            await ctx.emit("Warning", EXTRA_CONFIG_WARNING, warning)
        for warning in policy_catalog.next_release_warnings(release, rules or {}, source=source):
            await ctx.emit("Warning", POLICY_WARNING, warning)
    return Result()
