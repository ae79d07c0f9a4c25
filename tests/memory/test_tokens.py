from kernelkiln.memory.tokens import estimate_tokens


def test_about_four_characters_per_token_and_never_zero():
    assert estimate_tokens("") == 1
    assert estimate_tokens("x" * 400) == 100
    assert estimate_tokens("tile the matmul by 64") == 5
