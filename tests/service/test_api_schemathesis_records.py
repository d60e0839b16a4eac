"""The OpenAPI document describes raw records (issue 32 item 10): schemathesis against
``/update`` and ``/predict`` of a raw-records model.

A record's ``x`` is an object whose values are numbers, strings, lists of strings or
null, and a field the config does not name is ignored, whatever its value; the
document said ``x`` held numbers and strings only, so a record with a list or a null
was a request the document called invalid that the service accepted, and the answers
to them contradicted it. Here schemathesis (its CLI, every check, a fixed seed, a
bounded number of examples) sends generated bodies to the four records routes of a
``learnserve serve`` subprocess whose every request names the records model (the
schemathesis config pins ``model`` and ``{name}``): no 5xx, no answer outside the
document, no body the document refuses yet the service learns.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.service.procs import free_port, stop_process
from tests.service.serving import start_learnserve
from tests.service.test_api_schemathesis import ADMIN, HEADERS, run_schemathesis

pytest.importorskip("schemathesis")

# The name in the document's examples, which schemathesis's coverage phase starts its
# bodies from (it does not apply the config's "body.model" below).
MODEL = "adult"
RECORDS = {
    "algorithm": "arow",
    "features": {
        "kind": "records",
        "bits": 12,
        "fields": {
            "age": {"type": "numeric", "transform": {"bins": [25, 40, 60]}},
            "hours": {"type": "numeric", "transform": "log1p"},
            "job": {"type": "categorical", "namespace": "c"},
            "tags": {"type": "categorical", "namespace": "c"},
            "note": {"type": "text", "words": {"ngrams": 2}, "chars": {"ngrams": [3, 4]}},
        },
        "interactions": [["c", "c"]],
    },
}
LEARN = [
    {"x": {"age": 39, "hours": 40, "job": "clerk", "tags": ["a", "b"], "note": "works nights"},
     "y": ">50K"},
    {"x": {"age": 22, "hours": None, "job": "cook", "note": "part time", "other": [1, {}]},
     "y": "<=50K"},
]  # fmt: skip

# Every request names the records model (in the body and in the path), so that the
# generated records reach it; what a body may hold is the document's alone.
CONFIG = rf"""
[parameters]
"path.name" = "{MODEL}"
"body.model" = "{MODEL}"

# A schema-valid record may still be refused (422): a field of the wrong type for the
# config (text for a numeric field), or a label set the model does not take.
[[operations]]
include-path-regex = '^/(update|predict|models/\{{name\}}/(update|predict))$'
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422"]

[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "408", "409", "413", "415",
                     "422", "428", "429"]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir: Path = tmp_path_factory.mktemp("schemathesis-records")
    port = free_port()
    env = {
        "LEARNSERVE_DATA_DIR": str(data_dir),
        "LEARNSERVE_API_KEYS": f"{ADMIN}=predict+update+admin",
        "LEARNSERVE_MAX_BATCH_EXAMPLES": "50",
        "LEARNSERVE_MIN_VERSION_WAIT_SECONDS": "0.05",
    }
    proc = start_learnserve(port, env)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, headers=HEADERS, timeout=60) as c:
            r = c.put(f"/models/{MODEL}", json=RECORDS)
            assert r.status_code == 201, r.text
            r = c.post("/update", json={"model": MODEL, "examples": LEARN})
            assert r.status_code == 200, r.text
        yield url
    finally:
        stop_process(proc)
        log = Path(proc.log_path).read_text(errors="replace")
        assert "Traceback" not in log, log[-6000:]


def test_schemathesis_finds_nothing_on_the_records_routes(server: str, tmp_path: Path) -> None:
    examples = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "40"))
    out = run_schemathesis(
        server,
        tmp_path,
        examples,
        seed=32,
        config_text=CONFIG,
        phases="examples,coverage,fuzzing",
        extra=("--include-path-regex", r"^/(update|predict|models/\{name\}/(update|predict))$"),
    )
    assert "4 selected" in out, out  # the four records routes, and only they
