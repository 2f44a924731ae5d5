"""One suite run in three typed steps: answers → scores → metrics.

=====================  =====================================================================
``results``            the frozen dataclasses passed between the steps (``SuiteAnswers``,
                       ``SuiteScores``, ``SuiteMetrics``, ``SuiteResult``)
``config``             ``RunConfig`` and the one function that builds it from options
``answers``            prompts and generation -> ``SuiteAnswers``
``scores``             originality and judge -> ``SuiteScores``
``measure``            the metrics step -> ``SuiteMetrics``
``models``             the session's heavy scoring objects, each opened once
``export``             the one place a result becomes JSON (xdist, ``report.json``), the work line
=====================  =====================================================================

:class:`pytest_novelty.pipeline.runner.Runner` is the small facade that chains them for one checkpoint.
"""
