"""nbgrader configuration for the Copy That course.

Run nbgrader from this folder with no extra flags:
``nbgrader generate_assignment a1_views``, ``nbgrader autograde a1_views``, and so on.
``COPY_THAT_EDITION=zh`` in the environment selects the Chinese edition (``zh/solutions`` and
``zh/exercises``) for nbgrader and for ``python -m autograder grade`` alike, with the same gradebook.
"""
import os
import sys

from autograder.learner.cells import WARNING_PATTERN
from autograder.learner.editions import ZH_DIR, nbgrader_folders

c = get_config()  # noqa: F821  (nbgrader provides get_config)

c.CourseDirectory.course_id = "copy-that"
# solutions/ is the instructor's source, exercises/ the learners' release; with
# COPY_THAT_EDITION=zh, zh/solutions/ and zh/exercises/ (the Chinese edition: the same cells, grade
# ids, points and tests, so the gradebook is the same).  Any other value stops here with its error.
c.CourseDirectory.source_directory, c.CourseDirectory.release_directory = nbgrader_folders()
# A folder named zh inside an assignment is never copied along with it (the Chinese edition
# lives in its own tree, never inside the English release).
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ZH_DIR]

# A correct answer is never zeroed because a warning went to stderr: nbgrader scores any
# stderr output as a failure, so drop stderr streams that hold a Python warning.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = WARNING_PATTERN

# Test cells deleted by a learner are put back when grading.
c.OverwriteCells.add_missing_cells = True

# Per cell: generous for the course's small tensors, short enough for runaway loops.  The one
# place this limit is set: plain nbgrader, the formgrader and `python -m autograder grade` read it
# (`grade --cell-timeout N` overrides it for one run).  grade's own options are c.GradeOptions.*.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True

# The feedback a learner gets never shows the hidden tests: neither their source, nor the
# lines of a failing hidden test in its traceback (the diagnosis stays), nor any line of one
# that the submission's own code printed; and what the student's code displayed is inert.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "autograder.grading.inert.InertStudentContent",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    "autograder.grading.feedback.StripHiddenTracebacks",
    "autograder.grading.feedback.RedactHiddenTestLines",
    "nbgrader.preprocessors.ClearHiddenTests",
]

# Every HTML page nbconvert renders from a notebook with this configuration (the formgrader's
# manual grading page, the feedback files) goes through the course's allow-list sanitizer: the
# rendered markdown of every cell and output, every HTML output, raw cells, and the image size
# attributes the classic template writes unquoted.  See autograder/grading/htmlclean.py.
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.filters = {
    "clean_html": "autograder.grading.htmlclean.clean_html",
    "markdown2html": "autograder.grading.htmlclean.markdown2html",
    "get_metadata": "autograder.grading.htmlclean.get_metadata",
}

# `nbgrader export` (and `python -m autograder export`) writes grades.csv with every cell quoted and
# guarded: no cell a student's id or name controls starts a spreadsheet formula.
c.ExportApp.plugin_class = "autograder.grading.exports.GradesExportPlugin"

# nbgrader runs the `alembic` executable by name when it creates a gradebook; make it
# findable when this interpreter was started as `.venv/bin/python -m nbgrader` without
# activating the virtual environment.
_bindir = os.path.dirname(sys.executable)
if _bindir not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _bindir + os.pathsep + os.environ.get("PATH", "")

# Student code runs in the grading sandbox, whoever starts the grading: `nbgrader autograde`
# from this folder, the formgrader's Autograde button, or `python -m autograder grade`.
# nbgrader's own list, with its Execute replaced by the sandboxed one; what the student's code
# displayed and wrote is then made inert (no script runs when the instructor opens it).
c.Autograde.autograde_preprocessors = [
    "autograder.grading.execute.SandboxedExecute",
    "autograder.grading.inert.InertStudentContent",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "autograder.grading.gradebook.SaveAutoGradesOnce",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# nbgrader's sanitizing steps, with OverwriteCells replaced by one that grades a submission
# whatever graded cells it lost (nbgrader's own raises KeyError when a deleted test cell
# followed a deleted answer).
c.Autograde.sanitize_preprocessors = [
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "autograder.grading.cells.RestoreMissingCells",
    "nbgrader.preprocessors.CheckCellMetadata",
]
