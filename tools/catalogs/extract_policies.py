"""Dump the policy rules an installed nova registers as JSON on stdout.

Runs with the Python of a nova venv made by ``ensure_venvs.sh`` (never with the project's own
venv: it imports nova).  The rules are those of ``nova.policies.list_rules()``, the list nova's
own enforcer registers and ``oslopolicy-sample-generator`` documents; prints::

    {"nova_version": "...",
     "rules": {"<name>": {"deprecated_names": ["<old name>", ...]}}}

``deprecated_names`` are the names a rule replaced (``deprecated_rule``): oslo.policy still
reads an override written under such a name for the rule that replaced it.

Usage: <venv>/bin/python extract_policies.py
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from typing import Any


def main() -> int:
    from nova import policies

    rules: dict[str, dict[str, Any]] = {}
    for rule in policies.list_rules():
        old = getattr(rule, "deprecated_rule", None)
        old_name = getattr(old, "name", None)
        names = sorted({old_name} - {None, rule.name}) if old_name else []
        rules[rule.name] = {"deprecated_names": names}
    json.dump(
        {"nova_version": version("nova"), "rules": dict(sorted(rules.items()))},
        sys.stdout,
        indent=1,
        sort_keys=True,
    )
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
