"""Config families: the default mapping, additions, and which families are paired."""

import pytest

from retrieval_lib.errors import InputError
from retrieval_lib.study.families import (
    DEFAULT_CONFIG_FAMILIES,
    config_families,
    family_of,
    pair_families,
    parse_config_map,
)


@pytest.mark.parametrize(
    ("raw", "family"),
    [
        ("baseline", "baseline-local-direct"),
        ("Baseline", "baseline-local-direct"),
        ("mcp", "mcp-remote-direct"),
        ("sourcegraph_full", "mcp-remote-direct"),
        ("mcp-remote-direct", "mcp-remote-direct"),
        ("baseline-local-artifact", "baseline-local-artifact"),
        ("something-new", "something-new"),
    ],
)
def test_default_families(raw, family):
    assert family_of(raw) == family


def test_additions_extend_and_override_the_default():
    mapping = config_families({"sg-v2": "mcp-remote-direct", "mcp": "mcp-legacy"})
    assert mapping["sg-v2"] == "mcp-remote-direct"
    assert mapping["mcp"] == "mcp-legacy"
    assert mapping["sourcegraph_full"] == "mcp-remote-direct"
    assert DEFAULT_CONFIG_FAMILIES["mcp"] == "mcp-remote-direct"  # the default is untouched


@pytest.mark.parametrize("item", ["no-equals", "=family", "name=", " = "])
def test_a_malformed_config_map_entry_is_refused(item):
    with pytest.raises(InputError, match="NAME=FAMILY"):
        parse_config_map([item])


def test_empty_names_in_a_mapping_are_refused():
    with pytest.raises(InputError, match="non-empty"):
        config_families({"": "x"})


def test_direct_and_artifact_families_are_not_crossed():
    families = [
        "mcp-remote-artifact",
        "baseline-local-direct",
        "mcp-remote-direct",
        "baseline-local-artifact",
        "other",
    ]
    assert pair_families(families) == [
        ("baseline-local-artifact", "mcp-remote-artifact"),
        ("baseline-local-direct", "mcp-remote-direct"),
    ]
    # explicit choices are taken as given, even across modes
    assert pair_families(families, "baseline-local-direct", "mcp-remote-artifact") == [
        ("baseline-local-direct", "mcp-remote-artifact")
    ]
