"""One suite run in three typed steps, answers (``answers``) → scores (``scores``) → metrics
(``measure``), passing the dataclasses of ``results``; :class:`~pytest_novelty.pipeline.runner.Runner`
chains them for one checkpoint. ARCHITECTURE.md maps every module of the layer.
"""
