"""Experiment/*.md and Pictures/*.png from the records: `python -m study.report`."""
