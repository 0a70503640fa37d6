"""Dump the oslo.config option registry of an installed nova as JSON on stdout.

Runs with the Python of a nova venv made by ``ensure_venvs.sh`` (never with the project's
own venv: it imports nova and the oslo libraries).  It reads the namespace list from
nova's own ``etc/nova/nova-config-generator.conf`` (copied into the venv by
``ensure_venvs.sh``), loads each ``oslo.config.opts`` entry point exactly as
``oslo-config-generator`` does, and prints::

    {"nova_version": "...", "namespaces": [...],
     "sections": {"<section>": {"<option>": {"type": "...", "deprecated_names": ["<s>/<o>", ...],
                                             "deprecated_for_removal": bool, "secret": bool,
                                             "default": int}}}}

``secret`` is oslo.config's own flag (``Opt(secret=True)``: a password, a key, a URL that
carries credentials); the operator refuses such options in ``extraConfig``, whose values land
in a ConfigMap. ``default`` is given for Integer options only (see ``_integer_default``): the
operator derives the grace period of a nova-compute pod from ``[DEFAULT] graceful_shutdown_timeout``.

Sections that authenticate with a keystoneauth plugin only register ``auth_type`` and
``auth_section`` statically; the plugin's own options (``username``, ``password``...) are
registered at run time for the plugin named by ``auth_type``.  The operator renders
``auth_type = password`` in those sections, so the options of keystoneauth's ``password``
plugin, taken from the installed keystoneauth1, are added to every section that carries
``auth_type``.

Usage: <venv>/bin/python extract_opts.py <nova-config-generator.conf>
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from typing import Any


def _namespaces(generator_conf: str) -> list[str]:
    # `namespace` repeats, which configparser refuses: read it line by line.
    names: list[str] = []
    with open(generator_conf, encoding="utf-8") as fh:
        for raw in fh:
            line = raw.strip()
            if line.startswith("namespace") and "=" in line:
                key, _, value = line.partition("=")
                if key.strip() == "namespace":
                    names.append(value.strip())
    return names


def _type_name(opt: Any) -> str:
    return type(opt.type).__name__ if getattr(opt, "type", None) is not None else type(opt).__name__


def _record(opt: Any, section: str) -> dict[str, Any]:
    deprecated = sorted(
        {
            f"{d.group or section}/{d.name or opt.dest}"
            for d in getattr(opt, "deprecated_opts", []) or []
            if (d.group or section, d.name or opt.dest) != (section, opt.dest)
        }
    )
    record: dict[str, Any] = {
        "type": _type_name(opt),
        "deprecated_names": deprecated,
        "deprecated_for_removal": bool(getattr(opt, "deprecated_for_removal", False)),
        "secret": bool(getattr(opt, "secret", False)),
    }
    default = _integer_default(opt)
    if default is not None:
        record["default"] = default
    return record


def _integer_default(opt: Any) -> int | None:
    """The default of an Integer option, as nova registers it (its own set_defaults applied).

    Only where it is a plain number the same on every machine: an option whose default is
    computed from the host (a CPU count) documents it with a ``sample_default``, and is left out.
    """
    if _type_name(opt) != "Integer" or getattr(opt, "sample_default", None) is not None:
        return None
    default = getattr(opt, "default", None)
    return default if isinstance(default, int) and not isinstance(default, bool) else None


def main(argv: list[str]) -> int:
    from keystoneauth1 import loading as ks_loading
    from oslo_config import generator

    namespaces = _namespaces(argv[1])
    sections: dict[str, dict[str, dict[str, Any]]] = {}
    for _namespace, groups in generator._list_opts(namespaces):
        for group, opts in groups:
            section = "DEFAULT" if group is None else str(getattr(group, "name", group))
            entries = sections.setdefault(section, {})
            for opt in opts:
                entries.setdefault(opt.dest, _record(opt, section))

    password_plugin = ks_loading.get_auth_plugin_conf_options("password")
    for section, entries in sections.items():
        if "auth_type" in entries:
            for opt in password_plugin:
                entries.setdefault(opt.dest, _record(opt, section))

    json.dump(
        {
            "nova_version": version("nova"),
            "namespaces": namespaces,
            "sections": {s: dict(sorted(o.items())) for s, o in sorted(sections.items())},
        },
        sys.stdout,
        indent=1,
        sort_keys=True,
    )
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
