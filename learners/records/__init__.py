"""Raw JSON records to hashed sparse feature rows: the ``"records"`` feature kind.

A record is a flat JSON object ``{field: number | string | [strings] | null}``; a
:class:`RecordEncoder` made from a config (:mod:`learners.records.config`) turns records
into a :class:`~learners.csr_batch.Batch` of ``2**bits`` columns. A missing or null
field gives nothing; a field not in the config is ignored, or refused with
``"unknown_fields": "refuse"``.

Feature names. Every feature has a name, and its column is
``murmurhash3_32(name) & (2**bits - 1)`` (MurmurHash3 x86 32-bit, seed 0, of the
name's UTF-8 bytes, :func:`learners.feature_keys.murmurhash3_32`), so the names
:meth:`RecordEncoder.explain` lists can be hashed again anywhere:

=====================  ============================  ==================================
feature                name                          value
=====================  ============================  ==================================
intercept              ``^constant``                 1
numeric (none, log1p,  ``age``                       x, sign(x)·log(1+|x|), or the
standardize)                                         z-score (a zero value is left out)
numeric, bins          ``age#k``: bin k holds        1
                       ``edges[k-1] <= x < edges[k]``
categorical            ``job=clerk`` (one per        1
                       distinct string of a list)
text, word n-gram      ``text^free``, ``text^free    weighted count (below)
                       entry`` (tokens joined by
                       one space)
text, char n-gram      ``text~ fr``, ``text~ree ``   weighted count
interaction            the names joined by ``*``:    product of the values
                       ``job=clerk*age``,
                       ``job=clerk*sex=Male*age``
=====================  ============================  ==================================

Numeric and categorical names are those :class:`~learners.features.FeatureSpec`'s
``hashed`` kind gives ``{"age": 39, "job": "clerk"}``. Field names may not contain
``= ^ ~ # *`` (so no two features of different fields can share a name).

Text. Lower-cased per code point when ``lowercase`` (Python's ``str.lower`` of the
code point; U+0130 becomes ``i``); a token is a maximal run of code points that are
``str.isalnum()`` or combining marks (category M), see :mod:`learners.records._unicode`.
Word n-grams for n = 1..``words.ngrams`` with at most ``words.skips`` tokens skipped
between neighbours; character n-grams for n in ``chars.ngrams`` ([min, max]) of each
token padded with a space each side, or with ``across_words`` of the whole token
sequence joined by spaces and padded. Text is not Unicode-normalised (send NFC).
Each distinct name of a field counts its occurrences ``c``; its value is ``1``
(``binary``), ``c`` (``tf``) or ``log(1 + c)`` (``log_tf``, the default), times
``idf = log((1 + N) / (1 + df)) + 1`` when ``idf`` (N documents seen, df of them with
the feature's column), and the field's values are divided by their L2 norm when
``normalize`` (the default).

Interactions ``[a, b]`` / ``[a, b, c]`` of namespaces (a field's namespace is its
name unless set; fields may share one): the products of one feature of each
namespace (intercept excluded, text features after weighting). A namespace repeated
takes each unordered set of distinct features once (``[c, c]``: ``i < j``).

Limits: a text over ``max_text_bytes`` UTF-8 bytes, or a record with more than
``max_features_per_record`` distinct features, raises
:class:`~learners.csr_batch.FeatureError` naming ``examples[i].x.<field>``, as does a
text that could give more than 32 x ``max_features_per_record`` n-gram occurrences
(refused before they are made: repeated n-grams are counted, not kept), wrong types
(bool is not a number) and non-finite numbers; nothing of such a batch is learned.

Statistics (``standardize``, ``idf``) are updated after the record is encoded: a
record is encoded with the statistics of the records before it, in log order, also
within a batch, so one batch of 100 gives the vectors of 100 batches of one
(:meth:`RecordEncoder.learn`, or ``encode(sequential=True)`` then ``observe``).
"""

from __future__ import annotations

from learners.records.config import ConfigError, RecordsConfig, parse_config
from learners.records.encoder import INTERCEPT_NAME, RecordEncoder

__all__ = ["INTERCEPT_NAME", "ConfigError", "RecordEncoder", "RecordsConfig", "parse_config"]
