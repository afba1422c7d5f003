"""The course as files, for the instructor: where things are, the release built from
``solutions/`` with nbgrader, the student handout and the static site."""
