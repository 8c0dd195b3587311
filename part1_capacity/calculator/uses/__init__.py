"""What is built on a plan: comparing models and engines, the context x batch sweep, the serving commands a
plan emits and the entry point the calculator page runs in the browser. The top layer: it may import every other
calculator folder, and none of them imports it."""
