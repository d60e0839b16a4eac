"""The three streams of ``bench/features.py`` (issue 22), read once before any timing.

- ``adult``: UCI Adult's raw CSV rows (``adult-raw/adult.data``, 32,561 records: 6
  numeric + 8 categorical fields, "?" missing), labels ``<=50K`` / ``>50K``;
- ``sms``: the SMS Spam Collection (5,574 messages, one text field), ``ham`` / ``spam``;
- ``a9a``: the same Adult training rows as LIBSVM's a9a (``a9a/a9a``: 123 binary
  columns, 1-based), as ``{"index": value}`` maps, labels -1 / +1.

Each is a :class:`Stream` of records ready to put in a JSON body, and its lines in
Vowpal Wabbit's text format (:func:`vw_adult_line`, :func:`vw_sms_line`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from learners.io.records import read_csv_records, read_labeled_text
from tests.learners.test_records_quality import NUMERIC, adult_config, sms_config

# The served configs (issue 22's quality goals are met with these, through HTTP)
ADULT_FEATURES = adult_config("bins")  # numbers binned, categories one-hot, intercept
SMS_FEATURES = sms_config(chars={"ngrams": [3, 5]})  # words + character 3-5-grams
# The same features as VW's ``--ngram t2`` on the text: words and word bigrams
SMS_WORD_BIGRAMS = sms_config(words={"ngrams": 2})
A9A_FEATURES = {"kind": "sparse", "dim": 123, "index_base": 1}


@dataclass(frozen=True)
class Stream:
    name: str
    features: dict[str, Any]  # the model's "features" config
    records: list[Any]  # what goes in "x"
    labels: list[Any]  # what goes in "y"


def load_streams(data: Path, limit: int | None = None) -> dict[str, Stream] | str:
    """The three streams (the first ``limit`` rows of each), or why they are absent."""
    files = [data / "adult-raw" / "adult.data", data / "sms-spam" / "SMSSpamCollection",
             data / "a9a" / "a9a"]  # fmt: skip
    absent = [str(f) for f in files if not f.exists()]
    if absent:
        return f"data absent: {', '.join(absent)} (set LEARNSERVE_SHARED_DATA)"
    adult, ya = read_csv_records(files[0], label="class", numeric=NUMERIC, missing="?")
    texts, ys = read_labeled_text(files[1])
    a9a, y9 = read_a9a(files[2])
    n = limit
    return {
        "adult-raw": Stream("adult-raw", ADULT_FEATURES, adult[:n], ya[:n]),
        "sms": Stream("sms", SMS_FEATURES, [{"text": t} for t in texts[:n]], ys[:n]),
        "a9a": Stream("a9a", A9A_FEATURES, a9a[:n], y9[:n]),
    }


def read_a9a(path: Path) -> tuple[list[dict[str, float]], list[int]]:
    """LIBSVM lines as they are: ``{"3": 1.0, ...}`` (keys 1-based, as the file's)."""
    rows, labels = [], []
    for line in path.read_text().splitlines():
        parts = line.split()
        if not parts:
            continue
        labels.append(int(float(parts[0])))
        rows.append({k: float(v) for k, v in (p.split(":") for p in parts[1:])})
    return rows, labels


def _vw_token(value: str) -> str:
    # VW splits features on whitespace and reads ':' as a value and '|' as a namespace
    return value.replace(" ", "_").replace(":", "_").replace("|", "_")


def vw_adult_line(record: dict[str, Any], label: str) -> str:
    """``1 |n age:39 fnlwgt:77516 ... |c workclass=State-gov ...`` (missing fields left
    out), the numbers as VW takes them (name:value: one feature each, no binning)."""
    nums = " ".join(f"{k}:{v:g}" for k, v in record.items() if isinstance(v, float))
    cats = " ".join(f"{k}={_vw_token(v)}" for k, v in record.items() if isinstance(v, str))
    return f"{1 if label.startswith('>') else -1} |n {nums} |c {cats}"


def vw_sms_line(text: str, label: str) -> str:
    """``1 |t the text as it is`` (only VW's separators '|' and ':' made spaces): VW's
    tokeniser is a split on whitespace, with no lower-casing."""
    clean = text.replace("|", " ").replace(":", " ")
    return f"{1 if label == 'spam' else -1} |t {clean}"
