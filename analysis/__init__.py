"""Measurements and predictions built on :mod:`flows`."""
