"""The home page's table of exercises (course/exercises.py): notebooks, what each asks for, measured times; the
instructors' page's grading times for a class (course/class_times.py)."""
from course.class_times import class_times_table
from course.exercises import exercise_table

NAME = "course"
# Assignment → its lesson page, relative to site/ (the home page's links).
PAGES = {"01_attention": "part0/01_attention.md", "02_encoder_decoder": "part0/02_encoder_decoder.md",
         "03_kv_cache": "part0/03_kv_cache.md", "04_gpt2_int8": "part0/04_gpt2_int8.md", "05_rag": "part0/05_rag.md"}


def build(out):
    (out / "exercises.md").write_text(exercise_table(PAGES))
    (out / "class_times.md").write_text(class_times_table())
