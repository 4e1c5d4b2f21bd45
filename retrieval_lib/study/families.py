"""Config families: one name for configs that run the same setup under different labels.

Runs of one benchmark name the same configuration differently over time: the legacy
``baseline`` is today's ``baseline-local-direct``, the legacy ``mcp`` and
``sourcegraph_full`` are ``mcp-remote-direct``. A study pools trials by **family**, so a
legacy run and a current run of the same setup are compared as one config.

:data:`DEFAULT_CONFIG_FAMILIES` is the one default mapping (raw config name → family);
a params file (``config_map``) or ``--config-map NAME=FAMILY`` extends or overrides it. A
name the mapping does not know is its own family. Names are compared case-insensitively.
:func:`pair_families` pairs baseline and treatment families.

Examples
--------
>>> family_of("sourcegraph_full")
'mcp-remote-direct'
>>> family_of("my-config", {"my-config": "mcp-remote-direct"})
'mcp-remote-direct'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from retrieval_lib.errors import InputError

__all__ = [
    "DEFAULT_CONFIG_FAMILIES",
    "config_families",
    "family_of",
    "pair_families",
    "parse_config_map",
]

#: Raw config name (lowercase) → family. Current names map to themselves so that the
#: table documents every name seen in the benchmark's runs.
DEFAULT_CONFIG_FAMILIES: Mapping[str, str] = {
    "baseline": "baseline-local-direct",
    "baseline-local-direct": "baseline-local-direct",
    "baseline-local-artifact": "baseline-local-artifact",
    "mcp": "mcp-remote-direct",
    "sourcegraph_full": "mcp-remote-direct",
    "mcp-remote-direct": "mcp-remote-direct",
    "mcp-remote-artifact": "mcp-remote-artifact",
}
_MODES = ("direct", "artifact")


def config_families(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The default mapping extended (and overridden) by ``extra``, keys lowercased.

    Raises
    ------
    InputError
        An empty name or family in ``extra``.

    Examples
    --------
    >>> config_families({"Baseline": "legacy"})["baseline"]
    'legacy'
    """
    mapping = {k.lower(): v for k, v in DEFAULT_CONFIG_FAMILIES.items()}
    for name, family in (extra or {}).items():
        name, family = str(name).strip(), str(family).strip()
        if not name or not family:
            raise InputError(f"config map entry {name!r} -> {family!r}: both must be non-empty")
        mapping[name.lower()] = family
    return mapping


def family_of(name: str, extra: Mapping[str, str] | None = None) -> str:
    """The family of raw config ``name`` (itself when no mapping names it)."""
    mapping = config_families(extra) if extra else _DEFAULTS_LOWER
    return mapping.get(str(name).lower(), str(name))


_DEFAULTS_LOWER = config_families()


def parse_config_map(items: Iterable[str]) -> dict[str, str]:
    """Parse ``NAME=FAMILY`` strings (``--config-map``) into a mapping.

    Raises
    ------
    InputError
        An item without ``=`` or with an empty side.

    Examples
    --------
    >>> parse_config_map(["sg-v2=mcp-remote-direct"])
    {'sg-v2': 'mcp-remote-direct'}
    """
    out: dict[str, str] = {}
    for item in items:
        name, sep, family = str(item).partition("=")
        if not sep or not name.strip() or not family.strip():
            raise InputError(f"config map entry {item!r} is not NAME=FAMILY")
        out[name.strip()] = family.strip()
    return out


def _mode(family: str) -> str | None:
    tail = family.lower().rsplit("-", 1)[-1]
    return tail if "-" in family and tail in _MODES else None


def pair_families(
    families: Iterable[str], baseline: str | None = None, treatment: str | None = None
) -> list[tuple[str, str]]:
    """(baseline, treatment) family pairs to compare, sorted.

    As :func:`retrieval_lib.stats.paired.pair_configs` (baseline families ``baseline*``
    against treatment families ``mcp*``, ``sourcegraph*``; explicit choices win), except
    that a ``-direct`` family is never paired with an ``-artifact`` one.

    Examples
    --------
    >>> pair_families(["baseline-local-artifact", "mcp-remote-artifact",
    ...                "baseline-local-direct", "mcp-remote-direct"])
    [('baseline-local-artifact', 'mcp-remote-artifact'), ('baseline-local-direct', 'mcp-remote-direct')]
    """
    from retrieval_lib.stats.paired import pair_configs

    pairs = pair_configs(families, baseline, treatment)
    if baseline is not None and treatment is not None:
        return pairs
    return [
        (b, t) for b, t in pairs if _mode(b) is None or _mode(t) is None or _mode(b) == _mode(t)
    ]
