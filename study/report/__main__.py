"""python -m study.report"""

from study.report.build import main

if __name__ == "__main__":
    main()
