"""python -m helpers.decide: which accelerator for a fine-tuning job (helpers/study/decide.py)."""
from helpers.study.decide import main

if __name__ == "__main__":
    main()
