"""oslo.config's literal form of a value: what a file or an ``OS_*`` override must hold to yield it.

oslo.config expands ``$name`` and ``${section.name}`` in every value it reads, and first turns
``\\$`` into ``$$``. So a value reaches nova unchanged when each ``$`` is doubled, and a value
holding a backslash directly before a ``$`` has no literal form at all (nothing makes
oslo.config yield that pair). Every value the operator takes from a typed field of a CR (a
user name, a region, an endpoint) goes through :func:`literal`; ``extraConfig`` does not (its
values are oslo.config text by definition: ``$my_ip`` there is meant).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["NotRepresentable", "literal", "literal_sections"]


class NotRepresentable(ValueError):
    """A value oslo.config cannot carry literally; the message never quotes the value."""


def literal(value: str) -> str:
    """``value`` in the form oslo.config must read to yield ``value``: every ``$`` doubled."""
    if "\\$" in value:
        raise NotRepresentable(
            "contains a backslash directly followed by '$', which oslo.config cannot pass to nova literally"
        )
    return value.replace("$", "$$")


def literal_sections(sections: Mapping[str, Mapping[str, str]], *, what: str) -> dict[str, dict[str, str]]:
    """Every value of ``sections`` through :func:`literal`; a refusal names ``what``, section and key."""
    out: dict[str, dict[str, str]] = {}
    for section, options in sorted(sections.items()):
        out[section] = {}
        for key, value in sorted(options.items()):
            try:
                out[section][key] = literal(value)
            except NotRepresentable as exc:
                raise NotRepresentable(f"{what}: [{section}] {key} {exc}") from None
    return out
