""":class:`RecordEncoder`: raw JSON records to hashed sparse feature rows (a
:class:`~learners.csr_batch.Batch`), with the statistics it learns in log order.

The feature names and rules are documented in :mod:`learners.records`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import Any, NamedTuple

import numpy as np

from learners.csr_batch import Batch, FeatureError, canonical_rows
from learners.intercept import INTERCEPT_NAME
from learners.records import _columns as C
from learners.records import _row_kernel as K
from learners.records import _row_parts as P
from learners.records._name_hashes import span_hashes
from learners.records._scan_tables import ScannedAtoms, ScanTables, scan_tables
from learners.records._unicode import lower_table, token_chars
from learners.records.config import CategoricalField, NumericField, TextField, parse_config
from learners.records.state import EncoderState, canonical_bytes, idf_fields

__all__ = ["INTERCEPT_NAME", "RecordEncoder"]

_WEIGHTS = {"binary": P.WEIGHT_BINARY, "tf": P.WEIGHT_TF, "log_tf": P.WEIGHT_LOG_TF}


class _NameTable(NamedTuple):
    """The features of a batch as generated: name k is ``utf8[offsets[k]:offsets[k+1]]``,
    with its column and value."""

    utf8: np.ndarray
    offsets: np.ndarray
    columns: np.ndarray
    values: np.ndarray


class RecordEncoder:
    """Turns records (``{field: number | string | [strings] | null}``) into feature rows
    of ``2**bits`` hashed columns, as its config says (:func:`~learners.records.config.
    parse_config`); learns the ``standardize`` and ``idf`` statistics it observes.

    - :meth:`encode` encodes with the current statistics and changes nothing (what
      ``/predict`` does); ``sequential=True`` encodes row k with the statistics after
      rows ``< k`` of the batch (what an update sees), still changing nothing.
    - :meth:`observe` adds the records to the statistics, in order;
      :meth:`learn` is ``encode(sequential=True)`` then ``observe`` in one pass.
      A record is thus encoded with the statistics of the records before it, and the
      vectors do not depend on how the records are cut into batches.
    - :meth:`explain` lists one record's features: (name, column, value);
      :meth:`names` the distinct names of a batch's.
    - :meth:`to_state` / :meth:`from_state`: the statistics as JSON, exact to the bit.

    Errors are :class:`~learners.csr_batch.FeatureError` naming ``examples[i].x.<field>``;
    nothing is learned from a batch holding an error.

    >>> enc = RecordEncoder({"kind": "records", "bits": 10, "fields": {
    ...     "age": {"type": "numeric"}, "job": {"type": "categorical"}}})
    >>> b = enc.encode([{"age": 39, "job": "clerk"}, {"job": None}])
    >>> b.dim, b.indptr.tolist()
    (1024, [0, 3, 4])
    >>> [(name, value) for name, _, value in enc.explain({"age": 39, "job": "clerk"})]
    [('^constant', 1.0), ('age', 39.0), ('job=clerk', 1.0)]
    """

    def __init__(self, config: Any, *, path: str = "features") -> None:
        self.config = parse_config(config, path)
        cfg = self.config
        self.dim = cfg.dim
        self._state = EncoderState.empty(cfg)
        ns_ids = {ns: j for j, ns in enumerate(cfg.namespaces())}
        self._constants: list[str] = []  # names of numeric features, by field index
        self._const_of: dict[int, int] = {}
        n_text = sum(isinstance(f, TextField) for f in cfg.fields)
        self._f_text = np.full(len(cfg.fields), -1, dtype=np.int64)
        self._f_ns = np.array([ns_ids[f.namespace] for f in cfg.fields], dtype=np.int64)
        self._tp = np.zeros((n_text, P.TP_COLS), dtype=np.int64)
        prefixes = bytearray()
        self._f_pre = np.zeros((len(cfg.fields), 2), dtype=np.int64)  # name prefix span
        idf_slot = {name: s for s, name in enumerate(idf_fields(cfg))}
        for j, f in enumerate(cfg.fields):
            if isinstance(f, NumericField):
                self._const_of[j] = len(self._constants)
                if f.transform == "bins":  # bin k: edges[k-1] <= x < edges[k]
                    self._constants.extend(f"{f.name}#{k}" for k in range(len(f.edges) + 1))
                else:
                    self._constants.append(f.name)
            elif isinstance(f, CategoricalField):
                self._f_pre[j] = len(prefixes), len(prefixes) + len((f.name + "=").encode())
                prefixes += (f.name + "=").encode()
            elif isinstance(f, TextField):
                t = int((self._f_text >= 0).sum())
                self._f_text[j] = t
                w0 = len(prefixes)
                prefixes += (f.name + "^").encode()
                c0 = len(prefixes)
                prefixes += (f.name + "~").encode()
                self._tp[t] = [
                    f.lowercase,
                    f.word_ngrams,
                    f.skips,
                    f.char_min,
                    f.char_max,
                    f.across_words,
                    _WEIGHTS[f.weighting],
                    idf_slot.get(f.name, -1),
                    f.normalize,
                    w0,
                    c0,
                    c0,
                    len(prefixes),
                ]
        self._prefixes = np.frombuffer(bytes(prefixes), dtype=np.uint8)
        self._inter = np.array(
            [[ns_ids[ns] for ns in t] + [-1] * (3 - len(t)) for t in cfg.interactions],
            dtype=np.int64,
        ).reshape(-1, 3)
        self._keep_ns = np.zeros(len(ns_ids), dtype=np.bool_)
        self._keep_ns[self._inter[self._inter >= 0]] = True
        self._intercept = np.frombuffer(
            INTERCEPT_NAME.encode() if cfg.intercept else b"", dtype=np.uint8
        )
        self._scan: ScanTables | None = None
        self._known = frozenset(f.name for f in cfg.fields)

    # ------------------------------------------------------------------ public

    def encode(
        self,
        records: Sequence[Any],
        *,
        sequential: bool = False,
        where: str = "examples",
        field: str = "x",
    ) -> Batch:
        """The rows of ``records`` with the current statistics (unchanged)."""
        return self._run(records, sequential, False, where, field)[0]

    def observe(self, records: Sequence[Any], *, where: str = "examples", field: str = "x") -> None:
        """Add the records to the statistics, in order (a no-op without standardize/idf)."""
        if self._stateful():
            self._run(records, True, True, where, field)

    def learn(self, records: Sequence[Any], *, where: str = "examples", field: str = "x") -> Batch:
        """``encode(records, sequential=True)`` then ``observe(records)``, in one pass."""
        return self._run(records, True, True, where, field)[0]

    def ignored_fields(self, records: Sequence[Any]) -> dict[str, int]:
        """The fields of ``records`` the config does not read (``unknown_fields``
        ``"ignore"``), each with how many records hold it, first met first.

        >>> enc = RecordEncoder({"kind": "records", "bits": 4, "fields": {
        ...     "age": {"type": "numeric"}}})
        >>> enc.ignored_fields([{"age": 1, "sexx": "M"}, {"age": 2, "sexx": "F", "id": 7}])
        {'sexx': 2, 'id': 1}
        """
        known = self._known
        out: dict[str, int] = {}
        for r in records:
            if isinstance(r, Mapping) and not r.keys() <= known:
                for k in r:
                    if k not in known:
                        out[k] = out.get(k, 0) + 1
        return out

    def explain(self, record: Any) -> list[tuple[str, int, float]]:
        """The features of one record with the current statistics, in order of generation
        (intercept, fields in config order, interactions): (name, column, value). Values of
        a column are summed in the encoded row."""
        table = self._run([record], False, False, "examples", "x", K.NAMED)[1]
        assert table is not None
        raw = table.utf8.tobytes()
        offs = table.offsets.tolist()  # C-speed conversions, not a numpy-scalar loop
        named = [raw[a:b].decode("utf-8") for a, b in pairwise(offs)]
        return list(zip(named, table.columns.tolist(), table.values.tolist(), strict=True))

    def names(
        self, records: Sequence[Any], new: Callable[[np.ndarray], np.ndarray] | None = None
    ) -> list[str]:
        """The names of the features of ``records`` (as :meth:`explain` gives them), each
        once, first made first, in one pass over the batch. ``new``, given the names'
        full 32-bit MurmurHash3 (int64), answers those to keep (e.g.
        :meth:`~learners.feature_names.FeatureNames.unknown_hashes`): only those names
        are decoded, so a batch whose names are all known costs about an :meth:`encode`.

        >>> enc = RecordEncoder({"kind": "records", "bits": 4, "fields": {
        ...     "job": {"type": "categorical"}}})
        >>> enc.names([{"job": "a"}, {"job": ["b", "a"]}])
        ['^constant', 'job=a', 'job=b']
        """
        return self.encode_named(records, new)[1]

    def encode_named(
        self,
        records: Sequence[Any],
        new: Callable[[np.ndarray], np.ndarray] | None = None,
        *,
        where: str = "examples",
        field: str = "x",
    ) -> tuple[Batch, list[str]]:
        """:meth:`encode` and :meth:`names` of the same records in one pass (what a
        request that records its names needs: the two separately encode twice)."""
        batch, table = self._run(records, False, False, where, field, K.NAMED)
        assert table is not None
        return batch, _distinct_names(table, new)

    def scan_tables(self) -> ScanTables:
        """The config as the arrays a compiled reader of raw JSON records takes
        (:mod:`learners.records._scan_tables`), made once per encoder."""
        if self._scan is None:
            self._scan = scan_tables(self.config, self._constants, self._const_of)
        return self._scan

    def encode_atoms(
        self, atoms: ScannedAtoms, new: Callable[[np.ndarray], np.ndarray] | None = None
    ) -> tuple[Batch, list[str] | None]:
        """The batch of records a compiled reader has already turned into atoms (in the
        order :meth:`encode` makes them: by row, then field in config order), with the
        current statistics: exactly :meth:`encode`'s arrays; with ``new`` also
        :meth:`encode_named`'s names (else None). Raises FeatureError as :meth:`encode`
        (naming ``examples[i].x.<field>``) for a record over the limits."""
        if self._stateful():  # the statistics are read per record in Python
            raise ValueError("encode_atoms serves configs without standardize or idf")

        def run(mode: int) -> tuple[Batch, _NameTable | None]:
            return self._kernel(
                atoms.n_rows, atoms.cps, atoms.s_off, atoms.a_row, atoms.a_field, atoms.a_sidx,
                atoms.a_val, False, False, dict(self._state.welford), "examples", "x", mode,
            )  # fmt: skip

        if new is None:
            return run(K.CANONICAL)[0], None
        # The full hashes first (no name built): once the model knows a stream's names,
        # none is new, and the names are made only when one is.
        batch, made = run(K.HASHES)
        assert made is not None
        full = made.columns
        if not np.isin(full, new(full)).any():
            return batch, []
        table = run(K.NAMED)[1]
        assert table is not None
        return batch, _distinct_names(table, new)

    def to_config(self) -> dict[str, Any]:
        return self.config.to_config()

    def to_state(self) -> dict[str, Any]:
        """The learned statistics as JSON (see :mod:`learners.records.state`)."""
        return self._state.to_json(self.config)

    @classmethod
    def from_state(cls, config: Any, state: Any) -> RecordEncoder:
        """An encoder of ``config`` holding ``state`` (:meth:`to_state`'s form)."""
        enc = cls(config)
        enc._state = EncoderState.from_json(enc.config, state)
        return enc

    def state_bytes(self) -> bytes:
        """The config and statistics in one canonical byte form (for a state digest)."""
        return canonical_bytes({"config": self.to_config(), "state": self.to_state()})

    def state_digest(self) -> str:
        return hashlib.sha256(self.state_bytes()).hexdigest()

    # ------------------------------------------------------------------ the pipeline

    def _stateful(self) -> bool:
        return bool(self._state.welford) or self._state.docs.shape[0] > 0

    def _run(
        self,
        records: Sequence[Any],
        sequential: bool,
        commit: bool,
        where: str,
        field: str,
        mode: int = K.CANONICAL,
    ) -> tuple[Batch, _NameTable | None]:
        cfg = self.config
        if isinstance(records, str | bytes | Mapping) or not isinstance(records, Sequence):
            raise FeatureError(where, "must be a list of records")
        if len(records) == 0:
            raise FeatureError(where, "no examples")
        all_dicts = set(map(type, records)) == {dict}
        for i, r in enumerate(records if not all_dicts else ()):
            if not isinstance(r, Mapping):
                raise FeatureError(
                    f"{where}[{i}].{field}", f"must be an object, got {type(r).__name__}"
                )
        known = self._known
        for i, r in enumerate(records):
            if r.keys() <= known:
                continue
            if cfg.unknown_fields == "refuse":
                extra = next(k for k in r if k not in known)
                raise FeatureError(C.field_loc(where, i, field, str(extra)), "unknown field")
            if r.keys().isdisjoint(known):  # every field a typo: the intercept alone
                shown = ", ".join(repr(str(k)[:40]) for k in list(r)[:5])
                raise FeatureError(
                    f"{where}[{i}].{field}",
                    f"none of its fields is one of the model's ({shown}"
                    f"{', ...' if len(r) > 5 else ''} are not; it reads "
                    f"{', '.join(sorted(known)[:10])}{', ...' if len(known) > 10 else ''})",
                )
        state = self._state
        atoms = C.Atoms(self._constants)
        welford = dict(state.welford)
        for j, f in enumerate(cfg.fields):
            rows, vals = C.present(records, f.name, all_dicts)
            if not rows:
                continue

            def loc(i: int, name: str = f.name) -> str:
                return C.field_loc(where, i, field, name)

            if isinstance(f, NumericField):
                r, x, bins, w = C.read_numeric(
                    f, rows, vals, welford.get(f.name, (0, 0.0, 0.0)), sequential, loc
                )
                if f.name in welford:
                    welford[f.name] = w
                base = self._const_of[j]
                sidx = [base] * len(r) if bins is None else (bins + base).tolist()
                atoms.add(j, r.tolist(), sidx, x.tolist())
            elif isinstance(f, TextField):
                C.read_text(f, rows, vals, cfg.max_text_bytes, loc)
                atoms.add_strings(j, rows, vals, 0.0)
            else:
                cat_rows, values = C.read_categorical(f, rows, vals, loc)
                atoms.add_strings(j, cat_rows, values)
        a_row, a_field, a_sidx, a_val = atoms.arrays()

        def atom_loc(i: int, j: int) -> str:
            return C.field_loc(where, i, field, cfg.fields[j].name)

        cps, s_off = C.code_points(atoms, a_row, a_field, a_sidx, atom_loc)
        return self._kernel(
            len(records), cps, s_off, a_row, a_field, a_sidx, a_val,
            sequential, commit, welford, where, field, mode,
        )  # fmt: skip

    def _kernel(
        self,
        n_rows: int,
        cps: np.ndarray,
        s_off: np.ndarray,
        a_row: np.ndarray,
        a_field: np.ndarray,
        a_sidx: np.ndarray,
        a_val: np.ndarray,
        sequential: bool,
        commit: bool,
        welford: dict[str, tuple[int, float, float]],
        where: str,
        field: str,
        mode: int,
    ) -> tuple[Batch, _NameTable | None]:
        """The row kernel over the atoms, its refusals as FeatureErrors; with ``commit``
        the statistics after the batch become the encoder's."""
        cfg = self.config
        state = self._state

        def atom_loc(i: int, j: int) -> str:
            return C.field_loc(where, i, field, cfg.fields[j].name)

        update = sequential and state.docs.shape[0] > 0
        if cps.flags.writeable:  # one compiled kernel for both readers (the scanner's are
            cps = cps.view()  # writable, the encoder's read-only): the row kernel takes
            cps.flags.writeable = False  # minutes to compile, per argument type
        # Counted in place and taken back by the kernel unless kept (``commit``)
        df, docs = state.df, state.docs
        status, err_row, err_field, ip, cols, vals_out, names, noff = K.encode_rows(
            n_rows,
            cps,
            a_row,
            a_field,
            s_off,
            a_sidx,
            a_val,
            self._f_text,
            self._f_ns,
            self._f_pre,
            self._tp,
            self._prefixes,
            lower_table(),
            token_chars(),
            self._inter,
            self._keep_ns,
            self._intercept,
            df,
            docs,
            update,
            commit,
            self.dim - 1,
            cfg.max_features_per_record,
            mode,
        )
        limit = cfg.max_features_per_record
        if status == K.TOO_MANY_NGRAMS:
            n_max = K.NGRAMS_PER_FEATURE * limit
            raise FeatureError(
                atom_loc(err_row, err_field),
                f"the text could make more than {n_max} n-grams "
                f"({K.NGRAMS_PER_FEATURE} x max_features_per_record)",
            )
        if status == K.TOO_MANY:
            where_err = (
                atom_loc(err_row, err_field) if err_field >= 0 else f"{where}[{err_row}].{field}"
            )
            what = "the interactions make" if err_field < 0 else "the record makes"
            raise FeatureError(where_err, f"{what} more than max_features_per_record = {limit}")
        if commit:  # one assignment: a concurrent reader sees the old state or the new
            self._state = EncoderState(welford, docs, df)
        if mode == K.NAMED:  # one entry per name, as generated (not a canonical row)
            table = _NameTable(names, noff[: cols.shape[0] + 1], cols, vals_out)
            return Batch(*canonical_rows(ip, cols, vals_out), self.dim), table
        if mode == K.HASHES:  # as generated, the columns the full hashes: no names
            made = _NameTable(names, noff[:0], cols, vals_out)
            masked = cols & (self.dim - 1)  # the NAMED mode's columns (canonical_rows too)
            return Batch(*canonical_rows(ip, masked, vals_out), self.dim), made
        return Batch(ip, cols, vals_out, self.dim), None


def _distinct_names(table: _NameTable, new: Callable[[np.ndarray], np.ndarray] | None) -> list[str]:
    """The names of a name table, each once, first made first; with ``new`` (given the
    full hashes, answers those to keep) only those."""
    offs = table.offsets
    if new is not None:
        full = span_hashes(table.utf8, offs)
        keep = np.flatnonzero(np.isin(full, new(full)))
        if keep.size == 0:
            return []
    else:
        keep = np.arange(offs.shape[0] - 1)
    raw = table.utf8.tobytes()
    starts, ends = offs[keep].tolist(), offs[keep + 1].tolist()
    return list(dict.fromkeys(raw[a:b].decode("utf-8") for a, b in zip(starts, ends, strict=True)))
