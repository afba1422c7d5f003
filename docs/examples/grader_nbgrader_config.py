"""Copy That on JupyterHub: the grader account's nbgrader configuration.

Install as /home/grader-copy-that/.jupyter/nbgrader_config.py.  It only says where the course
checkout is; nbgrader then loads the checkout's own nbgrader_config.py from that folder.
"""
c = get_config()  # noqa: F821

c.CourseDirectory.root = "/home/grader-copy-that/copy-that"

# Several graders may autograde at once: PostgreSQL instead of the default SQLite file.
# c.CourseDirectory.db_url = "postgresql://grader:secret@localhost/copy_that"
