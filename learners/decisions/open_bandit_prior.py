"""The Beta(α, β) parameters of the Open Bandit Dataset's Bernoulli Thompson Sampling
policy for the campaign "all", per item 0-79, "used at the start of the data collection
period in ZOZOTOWN": ``obp/policy/conf/prior_bts.yaml`` of the Open Bandit Pipeline
(st-tech/zr-obp, commit 8cbd5fa4558b7ad2ba4781546d6604e4cc3e07c4, Apache-2.0), the
numbers unchanged (written there as floats, all whole). ``obp.policy.BernoulliTS(
is_zozotown_prior=True, campaign="all")`` draws from them and never updates them, which
is how the dataset's paper writes the BTS policy down
(:func:`learners.decisions.open_bandit.bts_policy_prior`).
"""

# fmt: off
ALPHA = (
    47, 8, 62, 142, 3, 14, 7, 857, 12, 15, 6, 100, 48, 23, 71, 61, 13, 16, 518, 30, 7, 4,
    23, 8, 10, 11, 11, 18, 121, 11, 11, 10, 14, 9, 204, 58, 3, 19, 42, 1013, 2, 328, 15,
    31, 14, 138, 45, 55, 23, 38, 10, 401, 52, 6, 3, 6, 5, 32, 35, 133, 52, 820, 43, 195, 8,
    42, 40, 4, 32, 30, 9, 22, 6, 23, 5, 54, 8, 22, 65, 246,
)
BETA = (
    12198, 3566, 15993, 35522, 2367, 4609, 3171, 181745, 4372, 4951, 3100, 24665, 13210,
    7061, 18061, 17449, 5644, 6787, 111326, 8776, 3334, 2271, 7389, 2659, 3665, 4724, 3561,
    5085, 27407, 4601, 4756, 4120, 4736, 3788, 45292, 14719, 2189, 5589, 11995, 222255,
    2308, 70034, 4801, 8274, 5421, 31912, 12213, 13576, 6230, 10382, 4141, 85731, 12811,
    2707, 2250, 2668, 2886, 9581, 9465, 28336, 12062, 162793, 12107, 41240, 3162, 11604,
    10818, 2923, 8897, 8654, 4000, 6580, 3174, 6766, 2602, 14506, 3968, 7523, 16532, 51964,
)
# fmt: on
