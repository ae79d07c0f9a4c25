"""Measurement: timing candidates against the reference, accounting for each batch, placement on cores,
the device lock, and scores."""
