"""Run and grade every finished notebook, save the times: the command ``python -m course.exercises``
(its code: course/site/exercises.py). The command's name is kept; the code lives in its room."""
import sys

from course.site.exercises import main

if __name__ == "__main__":
    sys.exit(main())
