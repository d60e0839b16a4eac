"""Extreme multi-label learning: FastXML, its L1 logistic solver, XC metrics.

>>> from learners.xml import FastXML, precision_at_k, ndcg_at_k
"""

from learners.xml.fastxml import FastXML
from learners.xml.l1_logistic import fit_l1_logistic
from learners.xml.metrics import ndcg_at_k, precision_at_k, xml_metrics

__all__ = ["FastXML", "fit_l1_logistic", "ndcg_at_k", "precision_at_k", "xml_metrics"]
