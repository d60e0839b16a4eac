"""The hot routes (/update, /predict and their /models/{name}/... forms, answered ahead of
FastAPI) are counted like every route: requests by route, model and status, errors by
code, latency, in-flight back to zero, and the X-Worker header on every answer."""

from __future__ import annotations

import os
from pathlib import Path

from service.settings import Settings
from tests.service.serving import ServerThread, dense_model


def _sample(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_hot_routes_are_counted_by_route_model_status_and_error(tmp_path: Path) -> None:
    # the metrics are the process's (other tests' servers count too): a model of its own,
    # and the errors' counts as differences
    m = "hot-metrics"
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        before = c.get("/metrics").text
        assert c.put(f"/models/{m}", json=dense_model(2)).status_code == 201
        ok = c.post("/update", json={"model": m, "examples": [{"x": [1.0, 0.0], "y": "a"}]})
        assert ok.status_code == 200 and ok.headers["x-worker"] == str(os.getpid())
        by_path = c.post(f"/models/{m}/predict", json={"instances": [{"x": [1.0, 0.0]}]})
        assert by_path.status_code == 200 and by_path.headers["x-worker"]
        bad = c.post("/update", json={"model": m, "examples": [{"x": [1.0], "y": "a"}]})
        assert bad.status_code == 422 and bad.headers["x-worker"]
        missing = c.post("/predict", json={"model": "nope", "instances": [{"x": [1.0, 0.0]}]})
        assert missing.status_code == 404
        wrong_type = c.post("/predict", content=b"{}", headers={"content-type": "text/plain"})
        assert wrong_type.status_code == 415
        text = c.get("/metrics").text

    def grew(name: str, **labels: str) -> float:
        return _sample(text, name, **labels) - _sample(before, name, **labels)

    count = "learnserve_requests_total"
    assert grew(count, route="/update", model=m, status="200") == 1
    assert grew(count, route="/update", status="422") == 1
    assert grew(count, route="/models/{name}/predict", model=m, status="200") == 1
    assert grew(count, route="/predict", status="404") == 1
    errors = "learnserve_request_errors_total"
    assert grew(errors, route="/update", status="422", error="invalid_input") == 1
    assert grew(errors, route="/predict", status="404", error="model_not_found") == 1
    assert grew(errors, route="/predict", status="415") == 1
    latency = "learnserve_request_duration_seconds_count"
    assert grew(latency, route="/update", model=m) == 1  # (the 422's model is "")
    assert _sample(text, "learnserve_requests_in_flight", route="/update") == 0
