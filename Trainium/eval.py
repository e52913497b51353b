"""Evaluate a fine-tuned checkpoint folder (written by train.py --output_dir) on the test split.

    python Trainium/eval.py --model_name_or_path ckpt/ --output_file ckpt/test_metrics.json

Prints accuracy and macro-F1 as JSON.
"""

from helpers import cli

if __name__ == "__main__":
    cli.evaluate_main(defaults={"device": "xla"})
