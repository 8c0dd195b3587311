"""Grade a class of every lesson and save the times: the command ``python -m course.class_times``
(its code: course/classroom/class_times.py). The command's name is kept; the code lives in its room."""
import sys

from course.classroom.class_times import main

if __name__ == "__main__":
    sys.exit(main())
