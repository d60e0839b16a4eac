"""Learning to rank: NDCG, online pairwise RankSVM, LambdaMART.

>>> from learners.ranking import ndcg_at_k, RankSVM, LambdaMART  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

__all__ = ["LambdaMART", "RankSVM", "make_ranker", "ndcg_at_k", "ndcg_per_query"]


def __getattr__(name: str) -> Any:
    # Lazy: importing the package must not compile every kernel.
    if name in ("ndcg_at_k", "ndcg_per_query"):
        from learners.ranking import ndcg

        return getattr(ndcg, name)
    if name in ("RankSVM", "make_ranker"):
        from learners.ranking import ranksvm

        return getattr(ranksvm, name)
    if name == "LambdaMART":
        from learners.ranking.lambdamart import LambdaMART

        return LambdaMART
    raise AttributeError(name)
