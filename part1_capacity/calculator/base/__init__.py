"""The base layer: errors, how numbers are written (``fmt``), the checks every user number, file and JSON
passes through (``validate``) and the dtypes' bytes. The lowest layer: it imports no other calculator folder (units
come from ``course/shared/units.py``)."""
