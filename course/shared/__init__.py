"""What every room of the course writes the same way: units, tables, safe learner text, the two languages, where
saved runs live, the shared sentence encoder. Imports no other room."""
