"""What an instructor hands students: the command ``python -m course.student_build OUT``
(its code: course/classroom/student_build.py). The command's name is kept; the code lives in its room."""
import sys

from course.classroom.student_build import main

if __name__ == "__main__":
    sys.exit(main())
