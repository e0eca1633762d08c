"""Private utilities: validation, threads, atomic file output, log-space special functions and
the note printed while numba compiles. Nothing here is public API."""
