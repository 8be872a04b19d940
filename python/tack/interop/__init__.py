"""Bridges between Tack and other libraries."""
