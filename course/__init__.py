"""Shared course machinery, imported by both parts and importing neither, in rooms (folders), lowest first:

    shared → machine → grading → classroom → site

A module imports modules of its own room or of a room to its left, never to its right (tests/house/test_house.py reads
the rooms from the folders and holds this order):

- ``shared/``: what every room writes the same way — units (GiB, round-up division), Markdown tables, learner text
  made safe to show, the two languages (i18n, the Korean glossary), where saved runs live, the sentence encoder two
  lessons share;
- ``machine/``: facts about the machine a measurement ran on — the CPU (``host``), memory probes of this process and
  of the page cache (``memstat``), a memory cgroup as a smaller host (``memcg``), one run record for every
  experiment (``records``), what this machine has installed for the course (``doctor``);
- ``grading/``: grading learner code — the checks' base and the lesson contract (``contract``), the notebook spec
  that generates solutions/ and exercises/ (``notebook_spec``), the grader's process (``grade_worker``), the
  learner's process (``learner``), the sandbox, the channel between them (``wire``, ``proxy``, ``modules``), what an
  exercise may not delegate (``method``), one grading's cgroup (``grading_group``) and ``autograde``, which runs it;
- ``classroom/``: a class on nbgrader (``nbgrader_class``, ``nbgrader_ext``; ``python -m course.classroom``), the
  student build, and how long grading a class takes (``class_times``, ``grading_bench``);
- ``site/``: the site's generated course pages (``sitegen``) and the exercises' block and times (``exercises``).

The modules left in ``course/`` itself are commands kept at their documented names (``python -m course.memcg``,
``course.exercises``, ``course.class_times``, ``course.student_build``, ``course.grading_bench``): each only calls its
room's ``main()``.
"""
