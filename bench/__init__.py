"""Benchmarks (``make bench``): each module measures one area and writes
``docs/benchmarks/<area>.json``; ``python -m bench`` runs them and writes the summary table
in docs/PERFORMANCE.md. Speed goals live here, never as timed assertions in tests.
"""
