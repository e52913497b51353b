"""python -m helpers.study.report"""

from helpers.study.report.build import main

if __name__ == "__main__":
    main()
