"""``python -m pytest_novelty.cli``: the ``pytest-novelty`` command."""

import sys

from pytest_novelty.cli import main

sys.exit(main())
