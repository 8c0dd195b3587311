"""How fast one lesson grades: the command ``python -m course.grading_bench``
(its code: course/classroom/grading_bench.py). The command's name is kept; the code lives in its room."""
import sys

from course.classroom.grading_bench import main

if __name__ == "__main__":
    sys.exit(main())
