"""The site's generated course pages (tables of the exercises, the glossary, a class's grading times): the top
room, which may read every other."""
