"""Run a command as a smaller host: the command ``python -m course.memcg --limit-gb N -- CMD``
(its code: course/machine/memcg.py). The command's name is kept; the code lives in its room."""
import sys

from course.machine.memcg import main

if __name__ == "__main__":
    sys.exit(main())
