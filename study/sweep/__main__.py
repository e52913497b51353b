"""python -m study.sweep"""

from study.sweep.runner import main

if __name__ == "__main__":
    main()
