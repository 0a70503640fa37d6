"""The single jinja2 Environment every text renderer uses.

StrictUndefined turns a missing value into an error instead of an empty string; templates
come from the package (``renderers/templates/*.j2``); no autoescaping (the outputs are INI
files and shell scripts, never HTML).  Manifests are never rendered as YAML text: they are
built as Python data, so no user value is pasted into YAML.
"""

from __future__ import annotations

import json
import shlex
from functools import cache
from typing import Any

import jinja2

__all__ = ["render"]


def _sh_quote(value: object) -> str:
    return shlex.quote(str(value))


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("nova_operator.renderers", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["shquote"] = _sh_quote
    env.filters["tojson"] = lambda v: json.dumps(v, sort_keys=True)
    return env


def render(template: str, **context: Any) -> str:
    """Render ``templates/<template>`` with ``context``; any undefined name raises."""
    return _environment().get_template(template).render(**context)
