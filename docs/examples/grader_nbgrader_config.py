"""Copy That on JupyterHub: the grader account's nbgrader configuration.

Install as /home/grader-copy-that/.jupyter/nbgrader_config.py.  It only says where the course
checkout is; nbgrader then loads the checkout's own nbgrader_config.py from that folder.
"""
c = get_config()  # noqa: F821

c.CourseDirectory.root = "/home/grader-copy-that/copy-that"

# Several graders may autograde at once: PostgreSQL instead of the default SQLite file.  Set here,
# it is the one gradebook of nbgrader, the formgrader and `python -m autograder grade`,
# `feedback` and `export` alike (they read this file as nbgrader does).
# c.CourseDirectory.db_url = "postgresql://grader:secret@localhost/copy_that"

# Options of `grade` can live here too (a flag on the command line overrides them):
# c.GradeOptions.jobs = 2                      # submissions graded at once (default: one more than
#                                              # the cores; in a pod, the node's cores: set it there)
# c.SandboxedExecute.require_sandbox = True    # never grade without bubblewrap
