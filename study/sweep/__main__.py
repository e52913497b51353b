"""python -m helpers.study.sweep"""

from helpers.study.sweep.runner import main

if __name__ == "__main__":
    main()
