"""``learnserve evaluate-policy FILE``: off-policy estimates of simple policies on a
DSJSON decision log (``learnserve decisions``' output, or VW's / Personalizer's); with
``--model CONFIG`` also a decision model's own policy
(:func:`service.models.decision_offline.evaluate_config`).

For each policy (``logged``: the policy that wrote the log, whose value is the mean
reward; ``uniform``: each action with 1/K; ``first``: the first action), IPS, SNIPS and
DR (with the per-action mean reward of the log as its reward model: 0 before an action
was seen, progressive) with 95 % intervals (``learners.decisions.estimators``), one
JSON object on stdout. Rows without a reward are skipped (counted as ``unrewarded``).

    learnserve evaluate-policy front.dsjson
    learnserve evaluate-policy front.dsjson --model challenger.json
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from learners.decisions.dsjson import DSJSONError, read_dsjson
from learners.decisions.estimators import Evaluation, dr_parts


def evaluate_policy(
    log: Annotated[Path, typer.Argument(help="DSJSON file (one decision per line).")],
    level: Annotated[
        float, typer.Option(min=0.5, max=0.999, help="Confidence level of the intervals.")
    ] = 0.95,
    config: Annotated[
        Path | None,
        typer.Option(
            "--model",
            help="A decision model's config (a PUT /models body, JSON): its "
            "policy evaluated on FILE as a challenger of the logging policy.",
        ),
    ] = None,
) -> None:
    """Estimate the value of the logged, uniform and first-action policies on FILE (and,
    with --model, of a decision model's own policy)."""
    evals = {name: Evaluation() for name in ("logged", "uniform", "first")}
    sums: dict[str, list[float]] = {}  # a reward model: each action id's mean reward so far
    rows = unrewarded = 0
    try:
        for rec in read_dsjson(log):
            if rec.reward is None:
                unrewarded += 1
                continue
            rows += 1
            k = len(rec.actions)
            keys = [str(a.get("_id", j)) for j, a in enumerate(rec.actions)]
            model = [sums[key][0] / sums[key][1] if key in sums else 0.0 for key in keys]
            targets = {
                "logged": rec.probabilities,
                "uniform": [1.0 / k] * k,
                "first": [1.0] + [0.0] * (k - 1),
            }
            for name, q in targets.items():
                evals[name].update(rec.probability, rec.reward, *dr_parts(q, model, rec.chosen))
            seen = sums.setdefault(keys[rec.chosen], [0.0, 0.0])
            seen[0] += rec.reward
            seen[1] += 1.0
    except (OSError, DSJSONError) as exc:
        typer.echo(f"error: {log}: {exc}", err=True)
        raise typer.Exit(2) from None
    out = {
        "file": str(log),
        "rows": rows,
        "unrewarded": unrewarded,
        "level": level,
        "policies": {name: e.summary(level) for name, e in evals.items()},
    }
    if config is not None:
        out["model"] = _evaluate_model(config, log)
    sys.stdout.write(orjson.dumps(out).decode() + "\n")


def _evaluate_model(config: Path, log: Path) -> dict[str, Any]:
    """``--model``: the config's policy on the log (its estimates at 95 %)."""
    from service.errors import ServiceError
    from service.models.decision_offline import evaluate_config
    from service.settings import Settings

    try:
        body = orjson.loads(config.read_bytes())
        if type(body) is not dict or body.get("algorithm") != "decision":
            raise ValueError('a decision model\'s config: {"algorithm": "decision", ...}')
    except (OSError, ValueError) as exc:
        typer.echo(f"error: {config}: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        return evaluate_config(body, read_dsjson(log), Settings(environment="development"))
    except (OSError, DSJSONError) as exc:
        typer.echo(f"error: {log}: {exc}", err=True)
        raise typer.Exit(2) from None
    except ServiceError as exc:  # the config's field, or the log's lines[i]
        where = log if exc.field and exc.field.startswith("lines") else config
        typer.echo(f"error: {where}: {exc.message}", err=True)
        raise typer.Exit(2) from None
