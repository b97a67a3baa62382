"""The code-editing kit every stage that edits or repairs code shares: the edit formats
(`edit_formats/`), resampling of an unchanged answer, drafts (their hashes, order and failure
status), the honesty check, traceback parsing, error notes, the mechanical repair rules
(`repairs/`, walked by `suggestions.py`), the checks before a run (`mending.py`: statements,
imports, library calls against their signatures), the isolated library lookup (`lookup.py`),
the prompt pieces every edit prompt starts with and the workspace's conventions. It imports no
stage: patched_code and run_results both build on it."""
