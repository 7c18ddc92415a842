"""Evaluation: metrics, datasets, runs, Ray, reports."""
