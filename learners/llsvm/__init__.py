"""Locally Linear SVM (Ladicky & Torr, ICML 2011): anchors by k-means, local linear models.

>>> from learners.llsvm import LLSVM
>>> LLSVM(n_anchors=4, n_neighbours=2).kind
'llsvm'
"""

from learners.llsvm.model import LLSVM

__all__ = ["LLSVM"]
