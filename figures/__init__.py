"""Figures and the command line."""
