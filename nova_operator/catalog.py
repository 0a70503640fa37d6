"""The extraConfig option catalogs: which ``[section] key`` pairs a nova release knows.

One JSON catalog per supported release lives in ``nova_operator/data/catalog-<release>.json``.
They are generated from the real ``nova`` package of each release by
``tools/catalogs/generate.py`` (nova's oslo.config option registry over the namespaces of
its own ``nova-config-generator.conf``); never edit them by hand.

CEL cannot hold a catalog of thousands of keys, and there is no admission webhook, so this
check runs in the reconciler's Config step (reported as a condition and an event).  This
module is pure: no I/O beyond reading the packaged data, no clock.

A key is *known* in a section when it is an option of that section, or a deprecated name
(``<section>/<name>``) of an option of any section: oslo.config still honours those, and
:func:`deprecated_options` reports them with their replacement.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import NamedTuple

__all__ = [
    "Catalog",
    "DeprecatedOption",
    "NoCatalogError",
    "OptionInfo",
    "admission_warnings",
    "deprecated_options",
    "format_deprecated",
    "format_secret",
    "format_unknown",
    "load_catalog",
    "no_catalog_refusal",
    "no_catalog_warning",
    "oslo_name",
    "secret_config_problems",
    "secret_options",
    "supported_releases",
    "unknown_option_messages",
    "unknown_options",
]

_PREFIX = "catalog-"
_SUFFIX = ".json"


def oslo_name(section: str, key: str) -> tuple[str, str]:
    """``(section, key)`` as oslo.config reads the rendered ``key = value`` line of ``[section]``.

    oslo.config lowercases every section name but ``DEFAULT`` and ends a key at the first
    ``:`` or ``=`` (the rest becomes the value); surrounding blanks are dropped.
    """
    section = section.strip()
    cut = min((i for i in (key.find(":"), key.find("=")) if i >= 0), default=len(key))
    return (section if section == "DEFAULT" else section.lower(), key[:cut].strip())


class NoCatalogError(LookupError):
    """No option catalog is shipped for the release (the check then fails open)."""


@dataclass(frozen=True, slots=True)
class OptionInfo:
    type: str
    deprecated_names: tuple[str, ...]
    deprecated_for_removal: bool
    secret: bool = False  # oslo.config's Opt(secret=True): a password, a key, a URL with credentials
    default: int | None = None  # an Integer option's default as the release registers it; else None


class DeprecatedOption(NamedTuple):
    section: str
    key: str
    replacement: str | None  # "<section>/<key>" of the option that replaces it, or None


@dataclass(frozen=True, slots=True)
class Catalog:
    release: str
    nova_version: str
    sections: Mapping[str, Mapping[str, OptionInfo]]
    # "<section>/<key>" of a deprecated name -> "<section>/<key>" of the option it names now
    aliases: Mapping[str, str]

    def has_section(self, section: str) -> bool:
        return section in self.sections or any(a.partition("/")[0] == section for a in self.aliases)

    def knows(self, section: str, key: str) -> bool:
        return key in self.sections.get(section, {}) or f"{section}/{key}" in self.aliases

    def option(self, section: str, key: str) -> OptionInfo | None:
        """The option ``[section] key`` names, directly or by a deprecated name (None: unknown)."""
        info = self.sections.get(section, {}).get(key)
        if info is None and (alias := self.aliases.get(f"{section}/{key}")) is not None:
            target_section, _, target_key = alias.partition("/")
            info = self.sections.get(target_section, {}).get(target_key)
        return info

    def is_secret(self, section: str, key: str) -> bool:
        info = self.option(section, key)
        return info is not None and info.secret


def supported_releases() -> tuple[str, ...]:
    """The releases a catalog is shipped for, sorted."""
    names = (entry.name for entry in _data().iterdir())
    return tuple(sorted(n[len(_PREFIX) : -len(_SUFFIX)] for n in names if _is_catalog(n)))


def _data() -> resources.abc.Traversable:
    return resources.files("nova_operator").joinpath("data")


def _is_catalog(name: str) -> bool:
    return name.startswith(_PREFIX) and name.endswith(_SUFFIX)


@cache
def load_catalog(release: str) -> Catalog:
    """The catalog of ``release``; :class:`NoCatalogError` when none is shipped."""
    if release not in supported_releases():
        raise NoCatalogError(release)
    raw = json.loads(
        resources.files("nova_operator.data").joinpath(f"{_PREFIX}{release}{_SUFFIX}").read_text()
    )
    sections: dict[str, dict[str, OptionInfo]] = {}
    aliases: dict[str, str] = {}
    for section, options in raw["sections"].items():
        entries = sections.setdefault(section, {})
        for key, info in options.items():
            entries[key] = OptionInfo(
                type=info["type"],
                deprecated_names=tuple(info["deprecated_names"]),
                deprecated_for_removal=bool(info["deprecated_for_removal"]),
                secret=bool(info.get("secret", False)),
                default=info.get("default"),
            )
            for old in info["deprecated_names"]:
                aliases.setdefault(old, f"{section}/{key}")
    return Catalog(release=release, nova_version=raw["nova_version"], sections=sections, aliases=aliases)


def unknown_options(
    release: str,
    extra_config: Mapping[str, Mapping[str, str]],
    *,
    exempt: Collection[tuple[str, str]] = (),
) -> list[tuple[str, str]]:
    """Every ``(section, key)`` of ``extra_config`` the release's catalog does not know, sorted.

    ``exempt`` holds pairs never reported (the operator-owned keys).  Raises
    :class:`NoCatalogError` when no catalog is shipped for ``release``.
    """
    catalog = load_catalog(release)
    return sorted(
        (section, key)
        for section, options in extra_config.items()
        for key in options
        if oslo_name(section, key) not in exempt and not catalog.knows(*oslo_name(section, key))
    )


def secret_options(
    release: str,
    extra_config: Mapping[str, Mapping[str, str]],
    *,
    exempt: Collection[tuple[str, str]] = (),
) -> list[tuple[str, str]]:
    """Every ``(section, key)`` of ``extra_config`` naming an option nova marks secret, sorted.

    Read as oslo.config reads the line (``oslo_name``), deprecated names included. Raises
    :class:`NoCatalogError` when no catalog is shipped for ``release``.
    """
    catalog = load_catalog(release)
    return sorted(
        (section, key)
        for section, options in extra_config.items()
        for key in options
        if oslo_name(section, key) not in exempt and catalog.is_secret(*oslo_name(section, key))
    )


def extra_config_problems(
    release: str | None,
    extra_config: Mapping[str, Mapping[str, str]] | None,
    *,
    exempt: Collection[tuple[str, str]],
    exempt_secret: Collection[tuple[str, str]] | None = None,
) -> list[str]:
    """One message per ``extraConfig`` pair the release's catalog does not know, then one per pair
    naming an option nova marks secret (``exempt``: the operator-owned pairs, never reported;
    ``exempt_secret``: those of the secret check when they differ). ``release``: the catalog's
    release (None: nothing to check against). Without a catalog for ``release``, one refusal: the
    check fails closed, nothing is taken unchecked."""
    if release is None or not extra_config:
        return []
    try:
        unknown = unknown_options(release, extra_config, exempt=exempt)
        secret = secret_options(
            release, extra_config, exempt=exempt if exempt_secret is None else exempt_secret
        )
    except NoCatalogError:
        return [no_catalog_refusal(release, extra_config)]
    return [format_unknown(release, s, k) for s, k in unknown] + [format_secret(s, k) for s, k in secret]


def secret_config_problems(
    release: str | None, keys: Collection[str], *, owned: Collection[tuple[str, str]]
) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """The ``section.option`` keys of a ``secretConfig`` Secret: ``({key: (section, option)}, problems)``.

    A key names one option of the release's catalog (deprecated names included), as oslo.config
    reads it, and never one the operator sets (``owned``). A deprecated name is resolved to the
    option it names before that check (``DEFAULT.log_config`` is ``[DEFAULT] log_config_append``).
    Without a release catalog nothing can be checked and every key is a problem. Messages name
    keys, never values.
    """
    problems: list[str] = []
    pairs: dict[str, tuple[str, str]] = {}
    try:
        catalog = load_catalog(release) if release else None
    except NoCatalogError:
        catalog = None
    if catalog is None:
        shipped = ", ".join(supported_releases())
        return {}, [
            f"release {release or '(none)'} ships no option catalog (catalogs: {shipped}), "
            "so no key can be checked"
        ]
    seen: dict[tuple[str, str], str] = {}
    for key in sorted(keys):
        raw_section, dot, raw_option = key.partition(".")
        section, option = oslo_name(raw_section, raw_option)
        if not dot or not section or not option or option != raw_option:
            problems.append(f"key {key} is not section.option")
            continue
        # the environment names only an option's current name: a deprecated one is resolved first,
        # so the owned check sees the option oslo.config would set
        alias = catalog.aliases.get(f"{section}/{option}")
        if option not in catalog.sections.get(section, {}) and alias is not None:
            section, _, option = alias.partition("/")
        if (section, option) in owned:
            problems.append(f"key {key}: the operator sets [{section}] {option} from the spec")
        elif not catalog.knows(section, option):
            problems.append(f"key {key}: no such option in the nova {catalog.release} option catalog")
        elif (section, option) in seen:
            problems.append(f"keys {seen[(section, option)]} and {key} name the same option")
        else:
            seen[(section, option)] = key
            pairs[key] = (section, option)
    return pairs, problems


def deprecated_options(release: str, extra_config: Mapping[str, Mapping[str, str]]) -> list[DeprecatedOption]:
    """Known keys of ``extra_config`` that are deprecated names or deprecated for removal, sorted."""
    catalog = load_catalog(release)
    found: list[DeprecatedOption] = []
    for section, options in extra_config.items():
        for key in options:
            info = catalog.sections.get(section, {}).get(key)
            if info is not None:
                if info.deprecated_for_removal:
                    found.append(DeprecatedOption(section, key, None))
            elif (alias := catalog.aliases.get(f"{section}/{key}")) is not None:
                found.append(DeprecatedOption(section, key, alias))
    return sorted(found)


def format_unknown(release: str, section: str, key: str) -> str:
    """The message for one unknown pair, naming the section and the key."""
    catalog = load_catalog(release)
    what = "option" if catalog.has_section(section) else "section"
    return f"spec.extraConfig[{section}][{key}]: no such {what} in the nova {release} option catalog"


def format_secret(section: str, key: str) -> str:
    """The refusal of an extraConfig pair naming an option nova marks secret, and the way to set it."""
    name = ".".join(oslo_name(section, key))
    return (
        f"spec.extraConfig[{section}][{key}]: nova marks this option secret, and extraConfig is rendered "
        f"into a ConfigMap; put it under key {name} of the Secret named by spec.secretConfig.secretRef"
    )


def unknown_option_messages(release: str, extra_config: Mapping[str, Mapping[str, str]]) -> list[str]:
    """One message per unknown pair (see :func:`format_unknown`), in sorted order."""
    return [format_unknown(release, s, k) for s, k in unknown_options(release, extra_config)]


def format_deprecated(release: str, option: DeprecatedOption) -> str:
    tail = f"replaced by {option.replacement}" if option.replacement else "with no replacement"
    return f"spec.extraConfig [{option.section}] {option.key}: deprecated option in nova {release}, {tail}"


def no_catalog_refusal(release: str, extra_config: Mapping[str, Mapping[str, str]]) -> str:
    """Why ``extra_config`` is refused for a release without a catalog: no key can be checked."""
    keys = ", ".join(f"[{s}] {k}" for s, options in sorted(extra_config.items()) for k in sorted(options))
    shipped = ", ".join(supported_releases())
    return (
        f"spec.extraConfig is refused: release {release} ships no option catalog (catalogs: {shipped}), "
        f"so none of its keys can be checked: {keys}"
    )


def no_catalog_warning(release: str) -> str:
    shipped = ", ".join(supported_releases())
    return (
        f"spec.extraConfig was not validated against an option catalog: none is shipped for "
        f"release {release} (catalogs: {shipped})"
    )


def admission_warnings(release: str, extra_config: Mapping[str, Mapping[str, str]] | None) -> list[str]:
    """The upstream webhook's *warnings* on ``extraConfig`` (nova-crd.md §6.6): one per deprecated
    option, or the single fail-open warning when no catalog is shipped for ``release``."""
    if not extra_config or not any(extra_config.values()):
        return []
    try:
        found = deprecated_options(release, extra_config)
    except NoCatalogError:
        return [no_catalog_warning(release)]
    return [format_deprecated(release, option) for option in found]
