"""Issue 31 item 8, through the real CLI against the real service with real files:
``--delimiter`` reads UCI's SMS Spam Collection as it is distributed (tab-separated, quotes
that are text), ``models create --config FILE|-`` makes any model (a raw-records one)
from its JSON config, and ``predict`` warns, naming them, of labels the model never saw
(UCI's ``adult.test`` writes ``>50K.``, ``adult.data`` ``>50K``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from service.cli.main import app
from tests.conftest import require_data
from tests.learners.test_records_quality import adult_config

SMS_MESSAGES = 5574  # the collection's (PROVENANCE.md); 2 fewer if quotes were CSV's
SMS = {
    "algorithm": "arow",
    "features": {"kind": "records", "bits": 18, "fields": {"SMS": {"type": "text"}}},
}


def run(url: str, *args: Any, code: int = 0, stdin: str | None = None) -> Any:
    r = CliRunner().invoke(app, [*map(str, args), "--url", url], input=stdin)
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    return r


def config_of(url: str, name: str) -> dict[str, Any]:
    got: dict[str, Any] = orjson.loads(run(url, "models", "show", name).stdout)["config"]
    return got


def test_models_create_takes_the_whole_config_from_a_file_or_stdin(server, tmp_path: Path):
    url = server.url
    path = tmp_path / "sms.json"
    path.write_bytes(orjson.dumps(SMS))
    made = orjson.loads(run(url, "models", "create", "sms-file", "--config", path).stdout)
    assert made["config"]["features"]["kind"] == "records"
    run(url, "models", "create", "sms-stdin", "--config", "-", stdin=orjson.dumps(SMS).decode())
    assert config_of(url, "sms-stdin") == config_of(url, "sms-file")
    # the same again: no change; the flags and the config never mix; bad files are named
    run(url, "models", "create", "sms-file", "--config", path)
    for args, said in [
        (["x", "arow", "--config", path], "ALGORITHM"),
        (["x", "--config", path, "--kind", "dense"], "--kind"),
        (["x", "--config", path, "-p", "r=1"], "--param"),
        (["x", "--config", tmp_path / "absent.json"], "cannot read"),
        (["x"], "ALGORITHM"),
    ]:
        r = run(url, "models", "create", *args, code=2)
        assert said in r.stderr, (args, r.stderr)
    for text in ("[1, 2]", "{not json"):
        r = run(url, "models", "create", "x", "--config", "-", code=2, stdin=text)
        assert "--config" in r.stderr and "stdin" in r.stderr, r.stderr


def test_update_and_predict_read_tsv_with_delimiter(server, tmp_path: Path) -> None:
    sms = require_data("sms-spam", "SMSSpamCollection")
    url = server.url
    config = tmp_path / "sms.json"
    config.write_bytes(orjson.dumps(SMS))
    run(url, "models", "create", "sms", "--config", config)
    flags = ["--format", "csv", "--label", "Label"]
    r = run(url, "update", "sms", "--file", sms, *flags, "--delimiter", "tab", "--no-progress",
            "--json")  # fmt: skip
    assert orjson.loads(r.stdout)["examples_learned"] == SMS_MESSAGES
    out = tmp_path / "pred.jsonl"
    r = run(url, "predict", "sms", "--file", sms, *flags, "--delimiter", "\\t", "-o", out)
    assert f"predicted {SMS_MESSAGES} instances" in r.stderr, r.stderr
    assert "warning" not in r.stderr
    assert len(out.read_text().splitlines()) == SMS_MESSAGES
    tsv = tmp_path / "sms.tsv"  # by its name: TSV, no flag needed
    shutil.copy(sms, tsv)
    r = run(url, "predict", "sms", "--file", tsv, "--label", "Label", "-o", out)
    assert f"predicted {SMS_MESSAGES} instances" in r.stderr, r.stderr
    for bad in (";;", '"', ""):
        r = run(url, "update", "sms", "--file", sms, *flags, "--delimiter", bad, code=2)
        assert "--delimiter" in r.stderr, (bad, r.stderr)
    svm = tmp_path / "a.svm"
    svm.write_text("1 1:1\n")
    r = run(url, "predict", "sms", "--file", svm, "--delimiter", ";", code=2)
    assert "--delimiter" in r.stderr and "only CSV" in r.stderr, r.stderr


def test_predict_warns_of_labels_the_model_never_saw(server, tmp_path: Path) -> None:
    data = require_data("adult-raw", "adult.data")
    test = require_data("adult-raw", "adult.test").read_text().splitlines()
    url = server.url
    config = tmp_path / "adult.json"
    config.write_bytes(orjson.dumps({"algorithm": "arow", "features": adult_config("bins")}))
    run(url, "models", "create", "adult", "--config", config)
    flags = ["--format", "csv", "--label", "class", "--missing", "?"]
    run(url, "update", "adult", "--file", data, *flags, "--no-progress", "--json")
    as_uci = tmp_path / "adult-uci.test"  # the labels as UCI's adult.test writes them
    as_uci.write_text("\n".join([test[0], *(line + "." for line in test[1:301])]) + "\n")
    r = run(url, "predict", "adult", "--file", as_uci, *flags, "-o", tmp_path / "p.jsonl")
    assert "accuracy 0.0000 (0/300 labelled)" in r.stderr, r.stderr
    warning = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1, r.stderr
    assert "300 rows" in warning[0] and "'<=50K.'" in warning[0] and "'>50K.'" in warning[0]
    assert "'<=50K'" in warning[0]  # and the model's own labels, to compare
    same = tmp_path / "adult-head.test"
    same.write_text("\n".join(test[:301]) + "\n")
    r = run(url, "predict", "adult", "--file", same, *flags, "-o", tmp_path / "p.jsonl")
    assert "warning" not in r.stderr and "/300 labelled)" in r.stderr, r.stderr
