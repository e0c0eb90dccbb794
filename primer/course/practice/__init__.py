"""The lessons' exercise checks: one module per idea the learner writes.

Each module defines ``check_<what>(fn, *, show=True) -> ExerciseReport``, which runs the
learner's function on cases the learner did not write (see :mod:`primer.course.checking`)
and prints one PASS/FAIL line per case, each FAIL naming what to fix. The coding round's
whole-loop battery is :func:`primer.course.exercises.check_loop`.
"""
