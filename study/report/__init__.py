"""Experiment/*.md and Pictures/*.png from the records: `python -m helpers.study.report`."""
