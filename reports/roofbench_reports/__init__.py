"""Reporting side of roofbench: reads results JSON files, writes summaries, plots and comparisons.

Standard library only, so that CI and a bare benchmark box can run it without a package registry.
"""
