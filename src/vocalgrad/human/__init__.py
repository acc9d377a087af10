"""Listening test for people: a FastAPI app over a SQLite store, answers in the result format.

Why a package of its own: the published human baseline let the trajectory give the label
away, accepted answers without a full play and had no headphone check. Here assignment is
balanced (`assign`), screening stimuli are generated (`screening`), the server enforces
play-to-end (`app`, `store`), and `export` writes the same rows the evaluation harness does.
"""
