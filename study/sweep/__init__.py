"""A suite's points, run and resumed: `python -m helpers.study.sweep`."""
