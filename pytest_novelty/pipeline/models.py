"""The heavy scoring objects of a session, each opened once: originality backends, judges,
equivalence checks and the judges' calibration agreement.

One :class:`SessionModels` is shared by every runner of a session (candidate, baseline, the
checkpoints of a series, every sweep value and denial round), so a judge or an equivalence model
loads once, on the session's device, honouring ``--trust-remote-code``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_novelty.infra.storage import read_json
from pytest_novelty.pipeline.config import RunConfig
from pytest_novelty.suites.schema import Suite

if TYPE_CHECKING:
    from pytest_novelty.scoring.equivalence import Equivalence
    from pytest_novelty.scoring.judges import Judge
    from pytest_novelty.scoring.originality import OriginalityBackend

_LOCAL_JUDGES = ("hf", "reward")  # the judge kinds that load a model here (and take device options)
_LOCAL_INDEXES = ("infini-gram", "ngram-set")  # originality backends read from local folders


class SessionModels:
    """Opens each backend, judge and equivalence check on first use and keeps it for the session."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self._backends: dict[str, OriginalityBackend] = {}
        self._judges: dict[tuple[str, int, float], Judge] = {}
        self._equivalences: dict[str, Equivalence] = {}
        self._agreements: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._identities: dict[str, str] = {}
        self.opened: list[str] = []  # what was loaded, in order (one entry per load)

    def backend(self, spec: str) -> OriginalityBackend:
        """The originality backend of ``spec`` (``infini-gram:DIR``, ``ngram-set:DIR``, …)."""
        if spec not in self._backends:
            from pytest_novelty.scoring.originality import open_backend

            self._backends[spec] = open_backend(spec, cache_dir=self._originality_cache)
            self.opened.append(f"originality {spec}")
        return self._backends[spec]

    def index_identity(self, spec: str) -> str:
        """What the originality answers of ``spec`` depend on: the verified content of its index,
        whatever the spelling of its path (:func:`~pytest_novelty.scoring.originality.identity.index_identity`);
        computed once per session."""
        if spec not in self._identities:
            from pytest_novelty.scoring.originality.identity import index_identity

            self._identities[spec] = index_identity(spec, cache_dir=self._originality_cache)
        return self._identities[spec]

    @property
    def _originality_cache(self) -> Path:
        """The folder the backends keep their answers and their memo of verified index files in."""
        return self.config.cache_dir / "originality"

    def judge_spec(self, suite: Suite) -> str:
        """The judge of a suite: the command line wins, then the suite file."""
        return self.config.judge or suite.scoring.judge

    def judge(self, suite: Suite) -> Judge:
        """The suite's judge (one per spec, sample count and temperature)."""
        spec = self.judge_spec(suite)
        key = (spec, suite.scoring.judge_samples, suite.scoring.judge_temperature)
        if key not in self._judges:
            from pytest_novelty.scoring.judges import open_judge

            options = local_options(self.config) if spec.partition(":")[0] in _LOCAL_JUDGES else {}
            self._judges[key] = open_judge(
                spec,
                cache_dir=self.config.cache_dir / "judge",
                samples=suite.scoring.judge_samples,
                temperature=suite.scoring.judge_temperature,
                base_url=self.config.judge_base_url,
                **options,
            )
            self.opened.append(f"judge {spec}")
        return self._judges[key]

    def equivalence(self, spec: str) -> Equivalence:
        """The equivalence check of ``scoring.equivalence`` (NoveltyBench's distinct_k and utility_k)."""
        if spec not in self._equivalences:
            from pytest_novelty.scoring.equivalence import open_equivalence

            self._equivalences[spec] = open_equivalence(spec, **local_options(self.config))
            self.opened.append(f"equivalence {spec}")
        return self._equivalences[spec]

    def judge_agreement(self, suite: Suite) -> dict[str, Any] | None:
        """The suite judge's agreement with ``[scoring] calibration`` (once per judge and file), or None.

        Measured for the checkpoint that is gated only: the judge, not the checkpoint, is what it
        describes."""
        if suite.scoring.calibration is None:
            return None
        from pytest_novelty.pipeline.calibration import suite_agreement

        key = (self.judge_spec(suite), suite.scoring.judge_samples, suite.scoring.judge_temperature,
               suite.scoring.calibration, suite.base_dir, suite.task)
        if key not in self._agreements:
            self._agreements[key] = suite_agreement(self.judge(suite), suite)
        return self._agreements[key]


def local_options(config: RunConfig) -> dict[str, Any]:
    """How a scoring model loaded here (a judge, an equivalence check) runs: the session's device and
    ``--trust-remote-code``."""
    return {"device": config.device, "trust_remote_code": config.trust_remote_code}


def originality_units(spec: str, model_path: str) -> str:
    """What originality's n-grams were counted in: words, or the tokens of the index's tokenizer."""
    kind = spec.partition(":")[0]
    if kind not in _LOCAL_INDEXES:
        return f"the {kind} index's units"
    from pytest_novelty.scoring.originality import INFO_FILE
    from pytest_novelty.scoring.originality.identity import local_targets

    folders = local_targets(spec) or []  # the index's folders, ``~`` expanded as the backend reads them
    meta = read_json(folders[0] / INFO_FILE) if folders else None
    tokenizer = str((meta if isinstance(meta, dict) else {}).get("tokenizer", ""))
    if tokenizer == "words":
        return "words"
    built_with = Path(tokenizer).expanduser().resolve() if tokenizer else None
    if built_with is not None and built_with.suffix == ".json":
        built_with = built_with.parent
    own = built_with == Path(model_path).expanduser().resolve()
    return "tokens of the checkpoint's tokenizer" if own else f"tokens of {tokenizer or 'the index tokenizer'}"
