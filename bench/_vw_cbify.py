"""VW's ``--cbify K --cb_explore_adf`` with a seed (``bench/decisions.py --seeds N``).

VW's ``--random_seed`` does not reach cbify's draws: cbify samples each example's action
with the seed ``app_seed + example_counter``, where ``app_seed`` is the constant
``uniform_hash("vw", 2, 0)`` (``vowpalwabbit/core/src/reductions/cb/cbify.cc``), so
every ``--random_seed`` gives the same figure. To run VW's explorers with other seeds,
this does cbify's part in Python over VW's own ``--cb_explore_adf`` learner: per row,
one ADF line per action (the context's features in the action's own namespace ``a<i>``
with a bias feature there, ``--noconstant``: cbify shifts every feature, the constant
too, by the action's offset, so each action has its own weights), VW's pmf, the draw
as cbify makes it (``sample_after_normalizing``: float32 sums, ``merand48_noadvance``
of ``base + example_counter``), then the chosen line labelled ``0:cost:p`` (cost 0 for
the true class, 1 otherwise) learned. The draw walks the actions best first (cbify walks
VW's action scores, sorted by cost; pyvw gives the pmf by action, so ties are taken in
action order). Seed 0 uses cbify's own base (``uniform_hash("vw")``), seed s > 0 the
base + s·2^32. Checked: seed 0 equals ``--cbify`` exactly on a9a's first 3,000 rows with
``--epsilon 0.05`` and ``--squarecb`` (0.8003, 0.8197); not with ``--cover`` (its action
scores are not in pmf order) nor on MNIST (10 actions: cbify shifts each action's
feature indices, so its hash collisions differ from these namespaces', and ε-greedy's
ties are in cost order), where it is the same learner with other draws.

>>> hex(murmur3_32(b"vw"))  # cbify's app_seed
'0x337ad8c'
"""

from __future__ import annotations

import re
import struct

import numpy as np

from learners.feature_keys import murmurhash3_32 as murmur3_32  # VW's uniform_hash

_MASK64 = (1 << 64) - 1


def merand48_noadvance(v: int) -> np.float32:
    v = (0xEECE66D5DEECE66D * v + 2147483647) & _MASK64
    bits = ((v >> 25) & 0x7FFFFF) | (127 << 23)
    return np.float32(struct.unpack("<f", struct.pack("<I", bits))[0] - 1.0)


def sample_after_normalizing(seed: int, pmf: list[float]) -> int:
    """VW's ``sample_after_normalizing`` (float32, negatives to 0)."""
    p = [np.float32(max(x, 0.0)) for x in pmf]
    total = np.float32(0.0)
    for x in p:
        total = np.float32(total + x)
    if total == 0:
        p = [np.float32(1.0)] * len(p)
        total = np.float32(len(p))
    draw = min(np.float32(total * merand48_noadvance(seed)), total)
    acc = np.float32(0.0)
    for i, x in enumerate(p):
        acc = np.float32(acc + x)
        if acc > draw:
            return i
    return len(p) - 1


def cbify_reward(
    explore: str, ctx: list[dict[str, float]], y: np.ndarray, k: int, seed: int
) -> float:
    """1 − the progressive loss of ``--cb_explore_adf <explore>`` with cbify's draws."""
    from vowpalwabbit import Workspace

    ws = Workspace(f"--cb_explore_adf {explore} --noconstant --quiet")
    base = murmur3_32(b"vw") + (int(seed) << 32)
    right = 0
    try:
        for counter, (x, truth) in enumerate(zip(ctx, y.tolist(), strict=True)):
            feats = " ".join(f"f{re.sub(r'[|: ]', '_', n)}:{v}" for n, v in x.items())
            lines = [f"|a{a} bias:1 {feats}" for a in range(k)]
            pmf = ws.predict(lines)
            # cbify draws over VW's action_scores in their order (best first: the
            # scores sorted by cost); pyvw gives them by action
            order = sorted(range(k), key=lambda i: -pmf[i])
            a = order[sample_after_normalizing(base + counter, [pmf[i] for i in order])]
            cost = 0 if a == int(truth) else 1
            right += 1 - cost
            lines[a] = f"0:{cost}:{float(np.float32(pmf[a]))} {lines[a]}"
            ws.learn(lines)
    finally:
        ws.finish()
    return right / len(y)
