"""The figure check of the snippet test (tests/docs/figures.py) on made-up blocks."""

from __future__ import annotations

from tests.docs.figures import model_names, quoted_figures, stale_figures, tolerance

BLOCK = """\
curl -fsS localhost:8000/models/income  # see https://example.org/#frag "x": 1.5
# -> {"accuracy": 0.9, "log_loss": 0.6602, "version": 1}
.venv/bin/learnserve models show other
"""


def test_quoted_figures_are_the_decimal_members_of_comments() -> None:
    assert quoted_figures(BLOCK) == [("x", "1.5"), ("accuracy", "0.9"), ("log_loss", "0.6602")]
    assert model_names(BLOCK) == {"income", "other"}


def test_one_unit_of_the_last_digit() -> None:
    assert tolerance("0.6602") == 1e-4 and tolerance("0.9") == 0.1 and tolerance("1.5e-3") == 1e-4


def test_a_figure_the_output_does_not_bear_out_is_named() -> None:
    printed = '{"x": 1.52, "accuracy":0.9,\n "log_loss": 0.65809, "log_loss": 0.1}'
    assert stale_figures(BLOCK, printed) == [
        '"log_loss": the page says 0.6602, the command printed 0.65809, 0.1'
    ]
    assert stale_figures(BLOCK, printed.replace("0.65809", "0.66015")) == []
    assert stale_figures(BLOCK, "{}") == [
        '"x": the page says 1.5, the command printed nothing',
        '"accuracy": the page says 0.9, the command printed nothing',
        '"log_loss": the page says 0.6602, the command printed nothing',
    ]
