"""Which accelerator for a fine-tuning job: `python -m helpers.study.decide`."""
