"""The home page's table of exercises (course/site/exercises.py), the glossary page's table (course/shared/glossary.py) and the
instructors' page's grading times for a class (course/classroom/class_times.py)."""
from course.shared import i18n
from course.classroom.class_times import class_times_table
from course.site.exercises import exercise_table
from course.shared.glossary import glossary_table

NAME = "course"
# Assignment → its lesson page, relative to site/ (the home page's links).
PAGES = {"01_attention": "part0/01_attention.md", "02_encoder_decoder": "part0/02_encoder_decoder.md",
         "03_kv_cache": "part0/03_kv_cache.md", "04_gpt2_int8": "part0/04_gpt2_int8.md", "05_rag": "part0/05_rag.md"}


def build(out):
    i18n.write_text(out, "exercises.md", lambda tr: exercise_table(PAGES, lang=tr.lang))
    i18n.write_text(out, "glossary.md", lambda tr: glossary_table(tr.lang))
    i18n.write_text(out, "class_times.md", lambda tr: class_times_table(tr=tr))
