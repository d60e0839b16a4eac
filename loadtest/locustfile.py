"""Locust scenarios for learnserve.

Pick scenarios by class name (all four run, weighted, when none is named)::

    locust -f loadtest/locustfile.py --headless -u 20 -r 5 -t 60s \
        --host http://127.0.0.1:8000 --csv loadtest/reports/run PredictHeavyUser

- ``PredictHeavyUser``  95 % single-instance predicts, 5 % small updates on one classifier.
- ``UpdateHeavyUser``   streams batches of ``--batch-size`` labelled examples (plus 10 % predicts).
- ``RankingUser``       ranking queries (predict 80 %, update with graded relevance 20 %).
- ``MixedUser``         all of the above spread over ``--mix-models`` classifiers and a ranker.

Every option also reads an environment variable (``LEARNSERVE_API_KEY``,
``LOADTEST_MODEL_PREFIX``, ...; see ``locust -f loadtest/locustfile.py --help``).
The models are created (``PUT /models/{name}``, idempotent) when the test starts.
Data are synthetic: a fixed hidden linear concept over named, hashed features, so
the progressive accuracy on the Grafana dashboards climbs as the models learn.
"""

from __future__ import annotations

import json
import logging
import random
import urllib.error
import urllib.request
from typing import Any

from locust import FastHttpUser, constant_throughput, events, tag, task
from locust.env import Environment

log = logging.getLogger("learnserve.loadtest")

N_FEATURES = 1000  # size of the named-feature vocabulary
CONCEPT_SEED = 20240607  # the hidden concept is the same in every process and run
_rng = random.Random(CONCEPT_SEED)
CONCEPT = [_rng.gauss(0.0, 1.0) for _ in range(N_FEATURES)]


# (flag, environment variable, type, default, help)
OPTIONS: list[tuple[str, str, type, Any, str]] = [
    ("--api-key", "LEARNSERVE_API_KEY", str, "",
     "API key sent as 'Authorization: Bearer KEY' (predict+update+admin scopes, since "
     "the models are created too). Empty: no header."),
    ("--model-prefix", "LOADTEST_MODEL_PREFIX", str, "loadtest",
     "Models are named PREFIX-clf, PREFIX-stream, PREFIX-rank, PREFIX-mix-N."),
    ("--algorithm", "LOADTEST_ALGORITHM", str, "arow",
     "Online classifier algorithm of the classification models."),
    ("--mix-models", "LOADTEST_MIX_MODELS", int, 4,
     "Number of classifiers MixedUser spreads its requests over."),
    ("--batch-size", "LOADTEST_BATCH_SIZE", int, 32,
     "Examples per POST /update of UpdateHeavyUser."),
    ("--nnz", "LOADTEST_NNZ", int, 20, "Non-zero named features per example."),
    ("--items", "LOADTEST_ITEMS", int, 10, "Items per ranking query."),
    ("--user-rate", "LOADTEST_USER_RATE", float, 0.0,
     "Requests/s per user (constant throughput); 0 = as fast as possible. "
     "Offered rate = users x user-rate."),
]  # fmt: skip


@events.init_command_line_parser.add_listener
def _add_arguments(parser: Any) -> None:
    for flag, env, kind, default, text in OPTIONS:
        parser.add_argument(flag, env_var=env, type=kind, default=default, help=text)


def model_names(options: Any) -> dict[str, list[str]]:
    p = options.model_prefix
    return {
        "clf": [f"{p}-clf"],
        "stream": [f"{p}-stream"],
        "rank": [f"{p}-rank"],
        "mix": [f"{p}-mix-{i}" for i in range(max(1, options.mix_models))],
    }


def model_configs(options: Any, groups: set[str]) -> dict[str, dict[str, Any]]:
    """name -> PUT /models body, for the model groups the selected scenarios use."""
    clf = {"algorithm": options.algorithm, "params": {}, "features": {"kind": "hashed", "bits": 20}}
    rank = {"algorithm": "ranksvm", "params": {}, "features": {"kind": "hashed", "bits": 20}}
    names = model_names(options)
    return {n: rank if g == "rank" else clf for g in sorted(groups) for n in names[g]}


def auth_headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _call(method: str, url: str, body: dict[str, Any], headers: dict[str, str]) -> int:
    req = urllib.request.Request(url, json.dumps(body).encode(), headers, method=method)
    with urllib.request.urlopen(req, timeout=30) as r:
        return int(r.status)


@events.test_start.add_listener
def _create_models(environment: Environment, **_kwargs: Any) -> None:
    """Create (or confirm) the models of the selected scenarios and teach each a first batch
    (a model that has seen no label cannot predict yet); stop the run if any call fails."""
    options = environment.parsed_options
    if environment.host is None or options is None:
        raise RuntimeError("pass --host http://HOST:PORT (the learnserve service)")
    base = environment.host.rstrip("/")
    headers = {"Content-Type": "application/json", **auth_headers(options.api_key)}
    groups = {g for cls in environment.user_classes for g in getattr(cls, "model_groups", ())}
    rng = random.Random(CONCEPT_SEED)
    for name, body in model_configs(options, groups).items():
        if body["algorithm"] == "ranksvm":
            seed = {"model": name, "queries": [make_query(rng, options.nnz, 10, True)]}
        else:
            seed = {"model": name, "examples": [make_example(rng, options.nnz) for _ in range(8)]}
        try:
            status = _call("PUT", f"{base}/models/{name}", body, headers)
            _call("POST", f"{base}/update", seed, headers)
            log.info("model %s ready (HTTP %s)", name, status)
        except urllib.error.URLError as e:  # HTTPError (an answer) or no connection at all
            if isinstance(e, urllib.error.HTTPError):
                problem = f"HTTP {e.code} {e.read().decode(errors='replace')[:500]}"
            else:
                problem = str(e.reason)
            log.error("cannot prepare model %s at %s: %s", name, base, problem)
            environment.process_exit_code = 1
            if environment.runner is not None:
                environment.runner.quit()
            raise RuntimeError(f"cannot prepare model {name}: {problem}") from None


# ----------------------------------------------------------------- synthetic data


def make_x(rng: random.Random, nnz: int) -> tuple[dict[str, float], float]:
    """A named-feature example and its score under the hidden concept."""
    idx = rng.sample(range(N_FEATURES), min(nnz, N_FEATURES))
    x = {f"f{i}": round(rng.gauss(0.0, 1.0), 4) for i in idx}
    score = sum(CONCEPT[i] * x[f"f{i}"] for i in idx)
    return x, score


def make_example(rng: random.Random, nnz: int) -> dict[str, Any]:
    x, score = make_x(rng, nnz)
    # 5 % label noise keeps the progressive accuracy realistic (below 1).
    label = "+1" if (score > 0) != (rng.random() < 0.05) else "-1"
    return {"x": x, "y": label}


def make_query(rng: random.Random, nnz: int, items: int, labelled: bool) -> dict[str, Any]:
    rows = []
    for _ in range(items):
        x, score = make_x(rng, nnz)
        item: dict[str, Any] = {"x": x}
        if labelled:  # graded relevance 0..3 from the hidden score
            item["relevance"] = max(0, min(3, int(score / 2.0 + 1.5)))
        rows.append(item)
    return {"qid": f"q{rng.randrange(1_000_000)}", "items": rows}


# ----------------------------------------------------------------------- users


class _LearnserveUser(FastHttpUser):
    abstract = True
    model_groups: tuple[str, ...] = ()  # which models (see model_names) the scenario uses

    def wait_time(self) -> float:
        rate = float(self.environment.parsed_options.user_rate)
        return constant_throughput(rate)(self) if rate > 0 else 0.0

    def on_start(self) -> None:
        opts = self.environment.parsed_options
        self.opts = opts
        self.rng = random.Random()
        self.headers = {"Content-Type": "application/json", **auth_headers(opts.api_key)}
        self.models = model_names(opts)

    def _post(self, path: str, body: dict[str, Any], name: str) -> None:
        with self.client.post(
            path, data=json.dumps(body), headers=self.headers, name=name, catch_response=True
        ) as r:
            if r.status_code != 200:
                r.failure(f"HTTP {r.status_code}: {(r.text or '')[:200]}")

    def predict(self, model: str, n: int = 1) -> None:
        instances = [{"x": make_x(self.rng, self.opts.nnz)[0]} for _ in range(n)]
        self._post("/predict", {"model": model, "instances": instances}, "POST /predict")

    def update(self, model: str, n: int) -> None:
        examples = [make_example(self.rng, self.opts.nnz) for _ in range(n)]
        self._post("/update", {"model": model, "examples": examples}, f"POST /update [{n}]")

    def rank(self, model: str) -> None:
        q = make_query(self.rng, self.opts.nnz, self.opts.items, labelled=False)
        self._post("/predict", {"model": model, "queries": [q]}, "POST /predict [ranking]")

    def rank_update(self, model: str) -> None:
        q = make_query(self.rng, self.opts.nnz, self.opts.items, labelled=True)
        self._post("/update", {"model": model, "queries": [q]}, "POST /update [ranking]")


class PredictHeavyUser(_LearnserveUser):
    """95 % predicts of one instance, 5 % updates of 8 examples, on one classifier."""

    weight = 3
    model_groups = ("clf",)

    @tag("predict")
    @task(95)
    def predict_one(self) -> None:
        self.predict(self.models["clf"][0])

    @tag("update")
    @task(5)
    def update_few(self) -> None:
        self.update(self.models["clf"][0], 8)


class UpdateHeavyUser(_LearnserveUser):
    """A stream of labelled batches (the online-learning write path), 10 % predicts."""

    weight = 1
    model_groups = ("stream",)

    @tag("update")
    @task(9)
    def stream_batch(self) -> None:
        self.update(self.models["stream"][0], self.opts.batch_size)

    @tag("predict")
    @task(1)
    def predict_some(self) -> None:
        self.predict(self.models["stream"][0], 4)


class RankingUser(_LearnserveUser):
    """Ranking queries against a RankSVM: 80 % scoring, 20 % learning from graded queries."""

    weight = 1
    model_groups = ("rank",)

    @tag("predict")
    @task(8)
    def rank_query(self) -> None:
        self.rank(self.models["rank"][0])

    @tag("update")
    @task(2)
    def learn_query(self) -> None:
        self.rank_update(self.models["rank"][0])


class MixedUser(_LearnserveUser):
    """Several classifiers and a ranker at once, the way a shared service sees traffic."""

    weight = 1
    model_groups = ("mix", "rank")

    @task(70)
    def predict_any(self) -> None:
        self.predict(self.rng.choice(self.models["mix"]), self.rng.choice((1, 1, 1, 10)))

    @task(20)
    def update_any(self) -> None:
        self.update(self.rng.choice(self.models["mix"]), self.rng.choice((1, 8, 32)))

    @task(8)
    def rank_query(self) -> None:
        self.rank(self.models["rank"][0])

    @task(2)
    def learn_query(self) -> None:
        self.rank_update(self.models["rank"][0])
