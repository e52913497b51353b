"""python -m helpers.study.decide"""

from helpers.study.decide.command import main

if __name__ == "__main__":
    main()
