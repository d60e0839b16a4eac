"""Issue #20: what ``learnserve import lightgbm`` (and the LambdaMART it builds) costs and
accepts, on models LightGBM trains here on its lambdarank example (real data).

- Memory follows what the trees use, not ``max_feature_idx``: a model text declaring
  2**31 - 1 features imports, loads and scores in a few MB (it took ~80 bytes per
  declared feature: 2.4 GB for 3 * 10**7), and a forest testing features beyond the
  direct feature table scores bit for bit as the same forest on small feature ids.
- The import is held to the model-size limits of a deploy (``max_model_bytes``,
  ``max_artifact_bytes``), checked before the forest is built.
- Numbers are read as LightGBM writes them: an integer beyond 64 bits in a tree was an
  ``OverflowError`` traceback (exit 1); ``Tree=abc``, two ``Tree=0``, ``1_0``, ``+1``,
  other scripts' digits were accepted. Each is now refused naming the line and field.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from learners import artifact
from learners.features import Batch
from learners.io.svmlight import read_svmlight
from learners.ranking.lambdamart import LambdaMART, forest_need
from learners.ranking.lightgbm_import import LightGBMFormatError, from_lightgbm_text
from tests.conftest import require_data
from tests.learners.artifact_tools import with_arrays, with_params

lgb = pytest.importorskip("lightgbm")
sp = pytest.importorskip("scipy.sparse")

REPO = Path(__file__).resolve().parents[2]
HUGE_IDX = 2**31 - 2  # the largest max_feature_idx: 2**31 - 1 features (int32 ids)
SPREAD = 7_000_000  # feature j -> j * SPREAD + 1: 300 features up to 2.09e9 < 2**31 - 1
TOL = 1e-9  # ours vs LightGBM (summation order); ours vs ours must be exact


class Ranker:
    def __init__(self, booster: Any, rows: Batch, dim: int) -> None:
        self.booster, self.rows, self.dim = booster, rows, dim
        self.text: str = booster.model_to_string()

    def reference(self) -> np.ndarray:
        X = sp.csr_matrix(
            (self.rows.values, self.rows.indices, self.rows.indptr),
            shape=(self.rows.n_rows, self.dim),
        )
        return np.asarray(self.booster.predict(X, raw_score=True))


@pytest.fixture(scope="module")
def ranker() -> Ranker:
    d = require_data("lightgbm-lambdarank")
    tr = read_svmlight(d / "rank.train", query_file=d / "rank.train.query")
    te = read_svmlight(d / "rank.test", query_file=d / "rank.test.query")
    dim = max(tr.X.dim, te.X.dim)
    X = sp.csr_matrix((tr.X.values, tr.X.indices, tr.X.indptr), shape=(tr.X.n_rows, dim))
    params = {"objective": "lambdarank", "num_leaves": 31, "min_data_in_leaf": 50,
              "verbose": -1, "num_threads": 1}  # fmt: skip
    b = lgb.train(params, lgb.Dataset(X, tr.y, group=tr.group_sizes), 30)
    return Ranker(b, Batch(te.X.indptr, te.X.indices, te.X.values, dim), dim)


def huge(text: str) -> str:
    """The same model declaring 2**31 - 1 features (feature_names then no longer match
    and are LightGBM's defaults, Column_j)."""
    return re.sub(r"(?m)^max_feature_idx=\d+$", f"max_feature_idx={HUGE_IDX}", text)


def spread(text: str) -> str:
    """``huge(text)`` with every split on feature ``j`` moved to ``j * SPREAD + 1``."""

    def move(m: re.Match[str]) -> str:
        return "split_feature=" + " ".join(str(int(j) * SPREAD + 1) for j in m.group(1).split())

    return re.sub(r"(?m)^split_feature=(.*)$", move, huge(text))


def spread_rows(rows: Batch) -> Batch:
    return Batch(rows.indptr, rows.indices * SPREAD + 1, rows.values, HUGE_IDX + 1)


# ---------------------------------------------------------------- memory per declared feature

_CHILD = r"""
import json, resource, sys, time
import numpy as np
from learners.features import Batch
from learners.ranking.lambdamart import LambdaMART
from learners.ranking.lightgbm_import import load_lightgbm_model

def run(path, dim):
    m = load_lightgbm_model(path)
    blob = m.to_bytes()
    served = LambdaMART.from_bytes(blob, max_bytes=64 << 20)  # as a deploy loads it
    rows = np.load(sys.argv[3])
    batch = Batch(rows["indptr"], rows["indices"], rows["values"], dim)
    return served.predict(batch), served.n_features_, len(blob)

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

small, n_small, _ = run(sys.argv[1], int(sys.argv[4]))  # warms numba and the allocator
before, t0 = peak(), time.perf_counter()
big, n_big, size = run(sys.argv[2], 2**31 - 1)
seconds, after = time.perf_counter() - t0, peak()
np.save(sys.argv[5], np.stack([small, big]))
print(json.dumps({"growth": after - before, "seconds": seconds, "n_features": [n_small, n_big],
                  "artifact_bytes": size}))
"""


def _capped() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (_CAP, _CAP))


# Children that import a huge max_feature_idx run with one numba thread and one malloc
# arena (a small address space) under a 3 GiB cap: a regression then stops early with
# a MemoryError (the old import asked 170 GB for 2**31 features) instead of taking the
# machine's memory.
_CAP = 3 << 30
_ENV = {"PYTHONPATH": str(REPO), "NUMBA_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "1",
        "PATH": "/usr/bin:/bin"}  # fmt: skip


def run_capped(args: list[Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=300, cwd=REPO,
        env=_ENV, preexec_fn=_capped,
    )  # fmt: skip


@pytest.fixture(scope="module")
def bounded(ranker: Ranker, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The capped child: the huge model imported, loaded as a deploy does, scored."""
    tmp = tmp_path_factory.mktemp("bounded")
    small, big = tmp / "small.txt", tmp / "huge.txt"
    small.write_text(ranker.text)
    big.write_text(huge(ranker.text))
    rows = tmp / "rows.npz"
    r = ranker.rows
    np.savez(rows, indptr=r.indptr, indices=r.indices, values=r.values)
    out = tmp / "scores.npy"
    done = run_capped([sys.executable, "-c", _CHILD, small, big, rows, ranker.dim, out])
    return done, out


@pytest.fixture
def in_process(bounded: Any) -> None:
    """Tests importing a huge max_feature_idx in this process run only once the capped
    child showed that it is bounded (a regression would take this process's memory)."""
    if bounded[0].returncode != 0:
        pytest.fail("the capped import of max_feature_idx 2**31 - 2 failed: not run in-process")


def test_huge_max_feature_idx_imports_and_scores_in_small_memory(
    ranker: Ranker, bounded: Any
) -> None:
    done, out = bounded
    assert done.returncode == 0, done.stderr[-3000:]
    assert "MemoryError" not in done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["n_features"] == [ranker.dim, HUGE_IDX + 1]
    # the 2**31 - 1 declared features cost nothing: no growth over the same model's peak
    assert got["growth"] < 16 << 20, got
    assert got["seconds"] < 5.0, got
    small_scores, big_scores = np.load(out)
    assert np.array_equal(small_scores, big_scores)  # bit for bit
    assert np.max(np.abs(big_scores - ranker.reference())) <= TOL


@pytest.mark.usefixtures("in_process")
def test_features_beyond_the_direct_table_score_bit_for_bit(ranker: Ranker) -> None:
    """Imported trees (LightGBM's missing-value rules) splitting on features up to 2.09e9:
    the model maps features by binary search, no table of 2**31 entries."""
    base = LambdaMART.from_bytes(from_lightgbm_text(ranker.text).to_bytes())
    far = LambdaMART.from_bytes(from_lightgbm_text(spread(ranker.text)).to_bytes())
    assert base._remap is not None and far._remap is None  # both lookups exercised
    assert int(far.trees_["feature"].max()) > 1 << 30
    ours = base.predict(ranker.rows)
    assert np.array_equal(far.predict(spread_rows(ranker.rows)), ours)
    assert np.max(np.abs(ours - ranker.reference())) <= TOL
    # a row holding only features no tree tests scores as an empty row
    lone = Batch(np.array([0, 1, 1]), np.array([5]), np.array([3.0]), HUGE_IDX + 1)
    assert far.predict(lone)[0] == far.predict(lone)[1]


@pytest.mark.parametrize("leaves", [15, 100], ids=["quickscorer", "traversal"])
def test_native_forest_on_far_features_scores_bit_for_bit(leaves: int) -> None:
    """Trees trained here (no decision_type; QuickScorer up to 64 leaves, else traversal),
    their feature ids moved beyond the direct table and n_features to 2**31 - 1: same scores,
    and the artifact loads within 1 MiB (it asked 8 bytes per declared feature: 16 GiB)."""
    d = require_data("lightgbm-lambdarank")
    tr = read_svmlight(d / "rank.train", n_features=300, query_file=d / "rank.train.query")
    te = read_svmlight(d / "rank.test", n_features=300, query_file=d / "rank.test.query")
    m = LambdaMART(n_estimators=8, num_leaves=leaves, min_data_in_leaf=5)
    m.fit(tr.X, tr.y, tr.group_sizes)
    blob = m.to_bytes()
    feature = artifact.loads(blob).arrays["feature"]
    far_blob = with_params(
        with_arrays(blob, feature=(feature * SPREAD + 1).astype(np.int32)),
        "meta",
        n_features=HUGE_IDX + 1,
    )
    far = LambdaMART.from_bytes(far_blob, max_bytes=1 << 20)
    assert far._remap is None and (far._elim is None) == (leaves > 64)
    rows = te.X
    expected = m.predict(rows)
    assert np.array_equal(far.predict(spread_rows(rows)), expected)
    assert np.array_equal(LambdaMART.from_bytes(blob).predict(rows), expected)


# ---------------------------------------------------------------- the limits of a deploy


@pytest.mark.usefixtures("in_process")
def test_import_is_held_to_the_deploy_memory_limit(ranker: Ranker) -> None:
    m = from_lightgbm_text(huge(ranker.text))
    nn, nl = m.trees_["feature"].shape[0], m.trees_["leaf_value"].shape[0]
    need = forest_need(sum(a.nbytes for a in m.trees_.values()), nn, nl, m.n_features_)
    assert need < 1 << 20  # 2**31 - 1 declared features are not part of it
    # the import refuses exactly what LambdaMART.from_bytes (a deploy) refuses
    with pytest.raises(artifact.ArtifactTooLarge) as e:
        from_lightgbm_text(huge(ranker.text), max_bytes=need - 1)
    assert f"30 trees ({nn} nodes, {nl} leaves)" in str(e.value)
    assert "max_model_bytes" in str(e.value) and e.value.need == need
    with pytest.raises(artifact.ArtifactTooLarge):
        LambdaMART.from_bytes(m.to_bytes(), max_bytes=need - 1)
    assert from_lightgbm_text(huge(ranker.text), max_bytes=need).n_trees_ == 30
    assert LambdaMART.from_bytes(m.to_bytes(), max_bytes=need).n_trees_ == 30


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return run_capped([sys.executable, "-m", "service.cli", *args])


def test_cli_imports_huge_max_feature_idx_and_applies_the_deploy_limits(
    ranker: Ranker, tmp_path: Path
) -> None:
    src, out = tmp_path / "huge.txt", tmp_path / "rank.lsart"
    src.write_text(huge(ranker.text))
    done = cli("import", "lightgbm", src, "-o", out)
    assert done.returncode == 0, done.stderr
    assert f"{HUGE_IDX + 1} features" in done.stderr
    served = LambdaMART.load(out, max_bytes=1 << 20)
    assert np.max(np.abs(served.predict(ranker.rows) - ranker.reference())) <= TOL
    out.unlink()
    for option, words in (("--max-model-bytes", "max_model_bytes"),
                          ("--max-artifact-bytes", "max_artifact_bytes")):  # fmt: skip
        done = cli("import", "lightgbm", src, "-o", out, option, 20_000)
        assert done.returncode == 2, done.stderr
        assert words in done.stderr and "Traceback" not in done.stderr
        assert not out.exists()


# ---------------------------------------------------------------- numbers as LightGBM writes them


def _refused(text: str) -> LightGBMFormatError:
    with pytest.raises(LightGBMFormatError) as info:
        from_lightgbm_text(text)
    return info.value


def _line(text: str, prefix: str, nth: int = 0) -> int:
    """1-based number of the ``nth`` line starting with ``prefix``."""
    found = [i for i, ln in enumerate(text.splitlines()) if ln.startswith(prefix)]
    return found[nth] + 1


def _set_word(text: str, prefix: str, word: str, position: int = 0) -> str:
    """The first ``prefix`` line with its value ``position`` replaced by ``word``."""
    lines = text.splitlines()
    i = _line(text, prefix) - 1
    key, values = lines[i].split("=", 1)
    words = values.split()
    words[position] = word
    lines[i] = f"{key}={' '.join(words)}"
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("field", ["left_child", "right_child", "split_feature"])
@pytest.mark.parametrize(
    "value",
    [2**63, 2**64 + 3, -(2**63) - 1, 2**31, 10**400],
    ids=["2**63", "2**64+3", "-2**63-1", "2**31", "10**400"],
)
def test_integers_beyond_32_bits_are_refused_naming_line_and_field(
    ranker: Ranker, field: str, value: int
) -> None:
    text = _set_word(ranker.text, f"{field}=", str(value), 1)
    e = _refused(text)
    assert e.line == _line(text, f"{field}=") and e.field == f"Tree=0 {field}", e
    assert "value 1 is" in str(e) and "[-2147483648, 2147483647]" in str(e)


def test_cli_refuses_an_overflowing_integer_with_exit_2(ranker: Ranker, tmp_path: Path) -> None:
    src, out = tmp_path / "bad.txt", tmp_path / "bad.lsart"
    text = _set_word(ranker.text, "left_child=", str(2**63))
    src.write_text(text)
    done = cli("import", "lightgbm", src, "-o", out)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "OverflowError" not in done.stderr
    message = " ".join(done.stderr.replace("│", " ").split())
    assert f"line {_line(text, 'left_child=')}, Tree=0 left_child" in message, message
    assert not out.exists()


def _second_tree_header(text: str, header: str) -> str:
    i = _line(text, "Tree=", 1) - 1
    lines = text.splitlines()
    lines[i] = header
    return "\n".join(lines) + "\n"


NOT_LIGHTGBM = [
    # (edit of the text, field named, words in the message)
    (lambda t: t.replace("Tree=0\n", "Tree=abc\n", 1), "Tree", "expected Tree=0"),
    (lambda t: _second_tree_header(t, "Tree=0"), "Tree", "each tree once, in order"),
    (lambda t: _second_tree_header(t, "Tree=2"), "Tree", "expected Tree=1"),
    (lambda t: _second_tree_header(t, "Tree=+1"), "Tree", "expected Tree=1"),
    (lambda t: _second_tree_header(t, "Tree=01"), "Tree", "expected Tree=1"),
    (lambda t: _set_word(t, "threshold=", "1_0"), "Tree=0 threshold", "'1_0' is not a number"),
    (lambda t: _set_word(t, "threshold=", "+0.5"), "Tree=0 threshold", "'+0.5'"),
    (lambda t: _set_word(t, "threshold=", "\u0661.5"), "Tree=0 threshold", "not a number"),
    (lambda t: _set_word(t, "threshold=", "infinity"), "Tree=0 threshold", "not a number"),
    (lambda t: _set_word(t, "threshold=", ".5"), "Tree=0 threshold", "not a number"),
    (lambda t: _set_word(t, "leaf_value=", "+1"), "Tree=0 leaf_value", "'+1'"),
    (lambda t: _set_word(t, "leaf_value=", "1__0"), "Tree=0 leaf_value", "not a number"),
    (lambda t: _set_word(t, "left_child=", "+1"), "Tree=0 left_child", "'+1' is not an integer"),
    (lambda t: _set_word(t, "split_feature=", "1_0"), "Tree=0 split_feature", "not an integer"),
    (lambda t: _set_word(t, "split_feature=", "\u0663"), "Tree=0 split_feature", "not an integer"),
    (lambda t: _set_word(t, "split_feature=", "007"), "Tree=0 split_feature", "not an integer"),
    (lambda t: _set_word(t, "decision_type=", "+2"), "Tree=0 decision_type", "not an integer"),
    (lambda t: t.replace("num_leaves=31", "num_leaves=3_1", 1), "Tree=0 num_leaves", "'3_1'"),
    (lambda t: t.replace("num_leaves=31", "num_leaves=+31", 1), "Tree=0 num_leaves", "'+31'"),
    (lambda t: t.replace("num_cat=0", "num_cat=-0_0", 1), "Tree=0 num_cat", "not an integer"),
    (
        lambda t: re.sub(r"max_feature_idx=(\d)(\d+)", r"max_feature_idx=\1_\2", t),
        "max_feature_idx",
        "not an integer",
    ),
    (lambda t: t.replace("num_class=1", "num_class=+1"), "num_class", "not an integer"),
    (
        lambda t: t.replace("num_class=1", f"num_class={2**64}"),
        "num_class",
        "outside [-2147483648, 2147483647]",
    ),
]


@pytest.mark.parametrize(
    ("edit", "field", "words"),
    NOT_LIGHTGBM,
    ids=[f"{i}-{c[1]}" for i, c in enumerate(NOT_LIGHTGBM)],
)
def test_text_lightgbm_does_not_write_is_refused(
    ranker: Ranker, edit: Any, field: str, words: str
) -> None:
    text = edit(ranker.text)
    assert text != ranker.text
    e = _refused(text)
    assert e.field == field and words in str(e), str(e)
    assert e.line is not None and str(e).startswith(f"line {e.line}, {field}: ")


def test_binary_sigmoid_is_a_number_as_lightgbm_writes_it(ranker: Ranker) -> None:
    text = re.sub(r"(?m)^objective=.*$", "objective=binary sigmoid:1_0", ranker.text)
    e = _refused(text)
    assert e.field == "objective" and "bad sigmoid" in str(e)
    ok = re.sub(r"(?m)^objective=.*$", "objective=binary sigmoid:1.5", ranker.text)
    assert from_lightgbm_text(ok).meta_["sigmoid"] == 1.5


def test_numbers_lightgbm_writes_are_read(ranker: Ranker) -> None:
    """fmt's ``{:.17g}`` forms: exponents with a sign, ``-0``, ``inf``/``-inf``."""
    text = _set_word(ranker.text, "threshold=", "1.0000000180025095e-35")
    text = _set_word(text, "leaf_value=", "-0")
    text = _set_word(text, "leaf_value=", "2.5e+00", 1)
    m = from_lightgbm_text(text)
    assert m.trees_["threshold"][0] == 1.0000000180025095e-35
    assert m.trees_["leaf_value"][0] == 0.0 and m.trees_["leaf_value"][1] == 2.5
