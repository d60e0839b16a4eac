"""What each raw-records config choice adds to accuracy (issue 31 item 10), in-process.

    .venv/bin/python bench/records_configs.py

One pass of AROW (``make_classifier("arow", dim, {})``: r=1, diagonal) over features
the records encoder (``learners.records.RecordEncoder``) makes, the protocol of
``tests/learners/test_records_quality.py``: the training records in order, each
encoded with the statistics of the records before it (``learn``), then the test
records encoded with the final statistics (``encode``); accuracy on the test records.

- adult-raw: ``adult.data`` in file order, accuracy on ``adult.test`` ("?" missing).
  A ladder from the plain config (numbers as they are, categories one-hot,
  intercept) adding one choice at a time: bins for the numbers that are not money
  (age, hours-per-week, education-num, fnlwgt), then the money fields
  (capital-gain, capital-loss) as log1p or binned, then pairs of categories
  (``[["c", "c"]]``). The bin edges are ``BINS`` of the quality test (round numbers
  of each column's range, not tuned on the test file).
- sms-spam: the documented split (``random.Random(0).shuffle``, first 80 % train),
  one text field: binary / log_tf unigrams, word bigrams, character 3-5-grams,
  words + characters, each L2-normalised (the default) or not; on the documented split
  and, as its 1,115 test messages make one message 0.0009, the mean over `--sms-seeds`
  shuffles (seeds 0..4, the same 80 / 20 cut).

A second set of short texts, not in ``../shared/data`` (``--sentences DIR``): the UCI
"Sentiment Labelled Sentences" (Kotzias et al. 2015: 3,000 one-sentence Amazon, Yelp
and IMDb reviews, positive or negative), read from ``*_labelled.txt`` files (a sentence,
a tab, the label) or ``*_labelled.csv`` ones (the quoted sentence, a comma, the label);
the same text options, the mean over ``--sms-seeds`` shuffles of an 80 / 20 cut.

Results: ``bench/results/records_configs.json``; the raw-records guide
(``docs/guides/raw-records.md``) quotes them and ``tests/learners/test_records_configs.py``
pins the Adult and SMS ones.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import numpy as np  # noqa: E402

from bench._common import print_table, shared_data_dir, write_results  # noqa: E402
from learners.io.records import read_csv_records, read_labeled_text  # noqa: E402
from learners.linear import make_classifier  # noqa: E402
from learners.records import RecordEncoder  # noqa: E402

# the quality test's columns and bin edges (not tuned on the test file)
from tests.learners.test_records_quality import BINS, CATEGORICAL, NUMERIC  # noqa: E402

Data = tuple[list[dict[str, Any]], list[str], list[dict[str, Any]], list[str]]

MONEY = ["capital-gain", "capital-loss"]


def adult_records_config(
    transforms: dict[str, Any], interactions: tuple[tuple[str, ...], ...] = ()
) -> dict[str, Any]:
    """Adult's records config: ``transforms[field]`` for each numeric field (``"none"``
    when absent; ``"bins"`` means ``{"bins": BINS[field]}``), categories one-hot in
    namespace ``c``, numbers in ``n``, intercept on."""
    fields: dict[str, Any] = {}
    for n in NUMERIC:
        t = transforms.get(n, "none")
        fields[n] = {"type": "numeric", "namespace": "n",
                     "transform": {"bins": BINS[n]} if t == "bins" else t}  # fmt: skip
    fields.update({c: {"type": "categorical", "namespace": "c"} for c in CATEGORICAL})
    return {"kind": "records", "bits": 20, "intercept": True, "fields": fields,
            "interactions": [list(t) for t in interactions]}  # fmt: skip


_NOT_MONEY = {n: "bins" for n in NUMERIC if n not in MONEY}
_ALL_BINS = {n: "bins" for n in NUMERIC}

# name -> (what the step adds, config); each step adds one choice to the one above it
# (the last three start again from "+ bins" to show the alternatives)
ADULT_STEPS: dict[str, tuple[str, dict[str, Any]]] = {
    "plain": ("numbers as they are, categories one-hot, intercept",
              adult_records_config({})),
    "+ bins": ("age, hours-per-week, education-num, fnlwgt binned",
               adult_records_config(_NOT_MONEY)),
    "+ bins, money log1p": ("capital-gain, capital-loss as log1p",
                            adult_records_config({**_NOT_MONEY, **dict.fromkeys(MONEY, "log1p")})),
    "+ bins, money binned": ("capital-gain, capital-loss binned too (every number binned)",
                             adult_records_config(_ALL_BINS)),
    "+ bins, money binned, c*c": ("pairs of categories [[\"c\", \"c\"]]",
                                  adult_records_config(_ALL_BINS, (("c", "c"),))),
    "plain, money binned": ("plain with only the money fields binned",
                            adult_records_config(dict.fromkeys(MONEY, "bins"))),
    "plain, money log1p": ("plain with only the money fields as log1p",
                           adult_records_config(dict.fromkeys(MONEY, "log1p"))),
    "every number log1p": ("every number log1p, nothing binned",
                           adult_records_config(dict.fromkeys(NUMERIC, "log1p"))),
}  # fmt: skip

# the text field's options; "normalize" left out = L2-normalised (the default)
SMS_TEXT: dict[str, dict[str, Any]] = {
    "words binary": {"weighting": "binary"},
    "words log_tf": {"weighting": "log_tf"},
    "words 1-2 binary": {"weighting": "binary", "words": {"ngrams": 2}},
    "words 1-2 log_tf": {"weighting": "log_tf", "words": {"ngrams": 2}},
    "chars 3-5 log_tf": {"words": None, "chars": {"ngrams": [3, 5]}},
    "words + chars 3-5 binary": {"weighting": "binary", "chars": {"ngrams": [3, 5]}},
    "words + chars 3-5 log_tf": {"chars": {"ngrams": [3, 5]}},
    "words 1-2 + chars 3-5 log_tf": {"words": {"ngrams": 2}, "chars": {"ngrams": [3, 5]}},
}
SMS_CONFIGS: dict[str, dict[str, Any]] = {
    **{f"{k}, normalised": v for k, v in SMS_TEXT.items()},
    **{f"{k}, not normalised": {**v, "normalize": False} for k, v in SMS_TEXT.items()},
}


def sms_records_config(text: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "records", "bits": 20, "fields": {"text": {"type": "text", **text}}}


def load_adult(data: Path) -> Data:
    kw: dict[str, Any] = {"label": "class", "numeric": NUMERIC, "missing": "?"}
    tr, ytr = read_csv_records(data / "adult-raw" / "adult.data", **kw)
    te, yte = read_csv_records(data / "adult-raw" / "adult.test", **kw)
    return tr, ytr, te, yte


def load_sms(data: Path, seed: int = 0) -> Data:
    """The documented split (``seed`` 0): ``random.Random(seed).shuffle``, the first 80 %
    train."""
    texts, labels = read_labeled_text(data / "sms-spam" / "SMSSpamCollection")
    return shuffled_split(list(zip(texts, labels, strict=True)), seed)


def load_sentences(directory: Path, seed: int = 0) -> Data:
    """The Sentiment Labelled Sentences of ``directory`` (all files, in name order),
    shuffled with ``random.Random(seed)``, the first 80 % train."""
    pairs: list[tuple[str, str]] = []
    for path in sorted(directory.glob("*_labelled.*")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            text, _, label = line.rpartition("\t" if path.suffix == ".txt" else ",")
            text = text.strip().strip('"').strip()
            if text and label.strip() in ("0", "1"):
                pairs.append((text, label.strip()))
    return shuffled_split(pairs, seed)


def shuffled_split(pairs: list[tuple[str, str]], seed: int) -> Data:
    """(text, label) pairs shuffled with ``random.Random(seed)``: the first 80 % train."""
    random.Random(seed).shuffle(pairs)
    n = int(0.8 * len(pairs))
    return (
        [{"text": t} for t, _ in pairs[:n]],
        [y for _, y in pairs[:n]],
        [{"text": t} for t, _ in pairs[n:]],
        [y for _, y in pairs[n:]],
    )


def one_pass(config: dict[str, Any], data: Data) -> tuple[float, float]:
    """(test accuracy, features per training record) of AROW after one pass."""
    tr, ytr, te, yte = data
    enc = RecordEncoder(config)
    clf = make_classifier("arow", enc.dim, {})
    batch = enc.learn(tr)
    clf.update(batch, ytr)
    acc = float(np.mean(np.asarray(clf.predict(enc.encode(te))) == np.asarray(yte)))
    return acc, batch.nnz / len(tr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--sms-seeds",
        type=int,
        default=5,
        help="shuffles of SMS measured (seed 0 is the documented split)",
    )
    ap.add_argument("--sentences", type=Path, default=None,
                    help="a directory of the UCI Sentiment Labelled Sentences files")  # fmt: skip
    args = ap.parse_args()
    data = shared_data_dir()
    results: dict[str, Any] = {}
    if (data / "adult-raw" / "adult.test").exists():
        adult = load_adult(data)
        rows, out = [], {}
        plain = None
        for name, (adds, config) in ADULT_STEPS.items():
            t0 = time.perf_counter()
            acc, nnz = one_pass(config, adult)
            plain = acc if plain is None else plain
            out[name] = {"adds": adds, "accuracy": acc, "vs_plain": acc - plain,
                         "nnz_per_record": nnz, "seconds": time.perf_counter() - t0,
                         "config": config}  # fmt: skip
            rows.append([name, adds, f"{acc:.4f}", f"{acc - plain:+.4f}", f"{nnz:.0f}"])
        print_table("Adult raw, AROW one pass, accuracy on adult.test",
                    ["config", "adds", "accuracy", "vs plain", "nnz/rec"], rows,
                    right_align_from=2)  # fmt: skip
        results["adult"] = out
    else:
        print("adult-raw absent: skipped", file=sys.stderr)
    if (data / "sms-spam" / "SMSSpamCollection").exists():
        splits = [load_sms(data, seed) for seed in range(args.sms_seeds)]
        rows, out = [], {}
        for name, text in SMS_CONFIGS.items():
            accs = [one_pass(sms_records_config(text), s) for s in splits]
            acc, nnz = accs[0]
            mean = float(np.mean([a for a, _ in accs]))
            out[name] = {"accuracy": acc, "nnz_per_record": nnz, "text": text,
                         "accuracy_per_seed": [a for a, _ in accs],
                         "mean_over_seeds": mean}  # fmt: skip
            rows.append([name, f"{acc:.4f}", f"{acc * 1115:.0f}/1115", f"{mean:.4f}", f"{nnz:.0f}"])
        print_table("SMS spam, AROW one pass, accuracy on the last 20 %",
                    ["text field", "accuracy", "right", f"mean of {len(splits)} shuffles",
                     "nnz/rec"], rows)  # fmt: skip
        results["sms_seeds"] = list(range(args.sms_seeds))
        results["sms"] = out
    else:
        print("sms-spam absent: skipped", file=sys.stderr)
    if args.sentences is not None:
        splits = [load_sentences(args.sentences, seed) for seed in range(args.sms_seeds)]
        rows, out = [], {}
        for name, text in SMS_CONFIGS.items():
            accs = [one_pass(sms_records_config(text), s)[0] for s in splits]
            out[name] = {"accuracy_per_seed": accs, "mean_over_seeds": float(np.mean(accs))}
            rows.append([name, f"{np.mean(accs):.4f}", f"{min(accs):.4f}-{max(accs):.4f}"])
        print_table(f"Sentiment Labelled Sentences ({len(splits[0][0]) + len(splits[0][2])} "
                    f"sentences), AROW one pass, mean of {len(splits)} shuffles",
                    ["text field", "mean accuracy", "range"], rows)  # fmt: skip
        results["sentences"] = out
    else:
        results["second_short_text_set"] = "not measured (--sentences DIR)"
    print(write_results("records_configs", results))


if __name__ == "__main__":
    main()
