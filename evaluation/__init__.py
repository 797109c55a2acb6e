"""Offline evaluation: splits, metrics, configurations, reports."""
