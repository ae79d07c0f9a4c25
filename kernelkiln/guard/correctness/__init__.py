"""Correctness: comparing a candidate's outputs with the reference's within the oracle's tolerances."""
