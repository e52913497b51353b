"""A suite's points, run and resumed: `python -m study.sweep`."""
