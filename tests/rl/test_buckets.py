from rl.transformers_policy import length_buckets


def test_one_long_session_is_not_padded_with_short_ones():
    lengths = [300, 320, 6000, 310, 305]
    chunks = length_buckets(lengths, padded_token_budget=16384)
    assert [2] in chunks and sorted(i for c in chunks for i in c) == [0, 1, 2, 3, 4]
    assert all(len(c) * max(lengths[i] for i in c) <= 16384 or len(c) == 1 for c in chunks)


def test_budget_splits_many_similar_sessions():
    chunks = length_buckets([1000] * 40, padded_token_budget=16384)
    assert [len(c) for c in chunks] == [16, 16, 8]
