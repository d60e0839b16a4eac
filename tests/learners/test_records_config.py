"""The records config: defaults written out, and every bad value refused with the path
of the value in the error."""

from __future__ import annotations

from typing import Any

import pytest

from learners.records import ConfigError, RecordEncoder, parse_config


def cfg(**fields: Any) -> dict[str, Any]:
    return {"kind": "records", "fields": fields}


def test_defaults_written_out() -> None:
    c = parse_config(cfg(age={"type": "numeric"}, t={"type": "text"}, job={"type": "categorical"}))
    out = c.to_config()
    assert out["bits"] == 20 and out["intercept"] is True and out["unknown_fields"] == "ignore"
    assert out["max_features_per_record"] == 10_000 and out["max_text_bytes"] == 100_000
    assert out["fields"]["age"] == {"type": "numeric", "transform": "none", "namespace": "age"}
    assert out["fields"]["t"] == {
        "type": "text",
        "lowercase": True,
        "words": {"ngrams": 1, "skips": 0},
        "chars": None,
        "weighting": "log_tf",
        "idf": False,
        "normalize": True,
        "namespace": "t",
    }
    assert parse_config(out) == c  # the canonical form reads back as itself


def test_full_example_of_the_issue() -> None:
    c = parse_config(
        {
            "kind": "records",
            "bits": 20,
            "intercept": True,
            "unknown_fields": "refuse",
            "max_features_per_record": 10000,
            "max_text_bytes": 100000,
            "fields": {
                "age": {"type": "numeric", "transform": {"bins": [18, 30.5, 65]}, "namespace": "n"},
                "job": {"type": "categorical", "namespace": "c"},
                "text": {
                    "type": "text",
                    "lowercase": True,
                    "words": {"ngrams": 2, "skips": 0},
                    "chars": {"ngrams": [3, 5], "across_words": False},
                    "weighting": "tf",
                    "idf": False,
                    "namespace": "t",
                },
            },
            "interactions": [["c", "n"], ["c", "c", "t"]],
        }
    )
    assert c.fields[0].edges == (18.0, 30.5, 65.0)
    assert (c.fields[2].char_min, c.fields[2].char_max, c.fields[2].word_ngrams) == (3, 5, 2)
    assert c.interactions == (("c", "n"), ("c", "c", "t"))
    assert c.namespaces() == ["n", "c", "t"]


BAD = [
    ({"kind": "hashed", "fields": {"a": {"type": "numeric"}}}, "features.kind"),
    ({"kind": "records", "fields": {}}, "features.fields"),
    ({"kind": "records", "bits": 0, "fields": {"a": {"type": "numeric"}}}, "features.bits"),
    ({"kind": "records", "bits": True, "fields": {"a": {"type": "numeric"}}}, "features.bits"),
    ({"kind": "records", "colour": 1, "fields": {"a": {"type": "numeric"}}}, "features.colour"),
    (cfg(a={"type": "numeric", "transform": "log"}), "features.fields.a.transform"),
    (cfg(a={"type": "numeric", "transform": {"bins": []}}), "features.fields.a.transform.bins"),
    (cfg(a={"type": "numeric", "transform": {"bins": [1, 1]}}), "features.fields.a.transform.bins"),
    (
        cfg(a={"type": "numeric", "transform": {"bins": [1, "2"]}}),
        "features.fields.a.transform.bins[1]",
    ),
    (
        cfg(a={"type": "numeric", "transform": {"bins": [1, float("nan")]}}),
        "features.fields.a.transform.bins[1]",
    ),
    (cfg(a={"type": "numeric", "transform": {"bin": [1]}}), "features.fields.a.transform.bin"),
    (cfg(a={"type": "numerical"}), "features.fields.a.type"),
    (cfg(a={"type": "numeric", "scale": 2}), "features.fields.a.scale"),
    (cfg(a=[1]), "features.fields.a"),
    (cfg(**{"a=b": {"type": "numeric"}}), "features.fields.a=b"),
    (cfg(a={"type": "categorical", "namespace": ""}), "features.fields.a.namespace"),
    (cfg(a={"type": "categorical", "namespace": "x*y"}), "features.fields.a.namespace"),
    (cfg(t={"type": "text", "lowercase": "yes"}), "features.fields.t.lowercase"),
    (cfg(t={"type": "text", "words": {"ngrams": 6}}), "features.fields.t.words.ngrams"),
    (cfg(t={"type": "text", "words": {"skips": -1}}), "features.fields.t.words.skips"),
    (cfg(t={"type": "text", "chars": {"ngrams": [5, 3]}}), "features.fields.t.chars.ngrams"),
    (cfg(t={"type": "text", "chars": {"ngrams": [0, 3]}}), "features.fields.t.chars.ngrams[0]"),
    (cfg(t={"type": "text", "chars": {"ngrams": [1, 2, 3]}}), "features.fields.t.chars.ngrams"),
    (cfg(t={"type": "text", "chars": {}}), "features.fields.t.chars.ngrams"),
    (cfg(t={"type": "text", "words": None}), "features.fields.t"),
    (cfg(t={"type": "text", "weighting": "bm25"}), "features.fields.t.weighting"),
    (cfg(t={"type": "text", "idf": 1}), "features.fields.t.idf"),
    (
        {"kind": "records", "bits": 25, "fields": {"t": {"type": "text", "idf": True}}},
        "features.fields.t.idf",
    ),
    (
        {"kind": "records", "unknown_fields": "warn", "fields": {"a": {"type": "numeric"}}},
        "features.unknown_fields",
    ),
    (
        {"kind": "records", "max_features_per_record": 0, "fields": {"a": {"type": "numeric"}}},
        "features.max_features_per_record",
    ),
    (
        {"kind": "records", "max_text_bytes": 2.5, "fields": {"a": {"type": "numeric"}}},
        "features.max_text_bytes",
    ),
    (
        {"kind": "records", "interactions": [["a", "z"]], "fields": {"a": {"type": "numeric"}}},
        "features.interactions[0][1]",
    ),
    (
        {"kind": "records", "interactions": [["a"]], "fields": {"a": {"type": "numeric"}}},
        "features.interactions[0]",
    ),
    (
        {
            "kind": "records",
            "interactions": [["a", "a"], ["a", "a"]],
            "fields": {"a": {"type": "numeric"}},
        },
        "features.interactions[1]",
    ),
    (
        {"kind": "records", "interactions": "a*a", "fields": {"a": {"type": "numeric"}}},
        "features.interactions",
    ),
]


@pytest.mark.parametrize(("config", "path"), BAD, ids=[p for _, p in BAD])
def test_bad_values_name_their_path(config: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as e:
        RecordEncoder(config)
    assert e.value.path == path
    assert str(e.value).startswith(path + ": ")


def test_config_error_is_a_value_error_and_path_prefix_is_chosen() -> None:
    with pytest.raises(ValueError, match=r"^model\.features\.fields\.a\.type: "):
        parse_config(cfg(a={"type": "number"}), path="model.features")


@pytest.mark.parametrize("bad", [["c"], {"a": 1}, None, 3])
def test_an_interaction_of_a_non_name_is_refused_naming_it(bad: object) -> None:
    """Issue 32 item 7: a list or object where a namespace belongs was a TypeError (500)."""
    config = {"kind": "records", "bits": 8, "fields": {"c": {"type": "categorical"}},
              "interactions": [[bad, "c"]]}  # fmt: skip
    with pytest.raises(ConfigError) as e:
        RecordEncoder(config)
    assert e.value.path == "features.interactions[0][0]"
