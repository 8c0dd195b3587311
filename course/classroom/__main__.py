"""``python -m course.classroom register|autograde|export-checks|zip-collect``: the class on nbgrader
(its code: course/classroom/nbgrader_class.py)."""
import sys

from course.classroom.nbgrader_class import main

if __name__ == "__main__":
    sys.exit(main())
