"""Moved to :mod:`playpen.training.rubrics.files` (``training/`` by family, issue 29). This old
path stays for one release as the same module object (patching either patches both); import
the new one. ``python -m playpen.training.rubric_files FILE`` still checks a rubric file."""
import runpy
import sys

if __name__ == "__main__":
    runpy.run_module("playpen.training.rubrics.files", run_name="__main__", alter_sys=True)
else:
    from playpen.training.rubrics import files
    sys.modules[__name__] = files
