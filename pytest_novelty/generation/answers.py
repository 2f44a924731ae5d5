"""Answers generated elsewhere as the model under test: ``--model answers:FILE[,FILE...]``.

A team that generates on its own stack (a vLLM or SGLang batch job, TGI, lm-evaluation-harness
with ``--log_samples``) hands the gate its files; the gate scores, decides, snapshots and reports
them as it would its own generations. The source sits behind the generation layer's Protocols
(:class:`~pytest_novelty.generation.Generator` and
:class:`~pytest_novelty.generation.RecordedAnswers`), so no later step knows where the answers came
from; only the work line says that they were read, not generated.

- **What is read.** Each of the comma-separated paths (the whole argument when it names a file
  whose name has commas) is a file, or a folder whose ``*.jsonl`` files are all read
  (not its subfolders; other files, such as lm-evaluation-harness's ``results_*.json``, are not
  answers). The formats are in :mod:`~pytest_novelty.generation.answer_files`.
- **Identity.** The identity_id is the content of the files: the SHA-256 of every byte of each
  (remembered under the file's stat in the identity memo, as a checkpoint's digests are),
  whatever their names or order, and the options that change which answers a prompt gets
  (``filtered``, ``id_field``). Reports and snapshots record it like a checkpoint's identity.
  Nothing goes to the answer cache: the files are the store.
- **Matching.** A suite run's prompt takes the pytest-novelty record of that run (``suite``) and
  prompt id; else, for the run itself (not a ``--novelty-repeat``), an lm-evaluation-harness
  sample: the one whose context is exactly the text the suite sends, or with ``id_field=NAME``
  the one whose logged document has the prompt's id in that field. ``doc_id`` is not a prompt
  id: it is the document's position in lm-evaluation-harness's own iteration of the task (after
  its split, ``process_docs``, ``--limit`` and ``--samples``), which says which prompt it is only
  when both sides list the same documents in the same order. Samples of the same text whose
  settings contradict the suite's are passed over (a sweep's other temperatures); two that agree
  and differ are ambiguous.
- **Mismatches are bad input** (exit 4), one line naming the prompt and the file: a prompt without
  answers, fewer answers than ``generation.samples`` (extra ones are not read), a prompt text
  that differs from the one the suite sends (``?accept_prompt_text=true`` accepts it, and the
  report says how many differed), and settings the file records that contradict the suite's
  (temperature, top-p, top-k, new tokens, or a stop string the suite does not stop at; the seed
  is not compared: answers made elsewhere come from seeds of their own).

Options: ``accept_prompt_text`` (bool), ``filtered`` (bool: lm-evaluation-harness
``filtered_resps`` instead of ``resps``), ``id_field`` (str).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_novelty.generation import Batch, PromptRequest, prompt_key
from pytest_novelty.generation.answer_files import FORMAT, AnswerRecord, chat_text, read_answer_file
from pytest_novelty.generation.backends import ANSWERS_PREFIX, MODEL_SOURCES
from pytest_novelty.infra.errors import ConfigError, HarnessError, did_you_mean
from pytest_novelty.infra.hashing import hash_files
from pytest_novelty.infra.identity import Identity
from pytest_novelty.suites.schema import GenerationSettings

if TYPE_CHECKING:
    from pytest_novelty.generation import ModelInput
    from pytest_novelty.infra.hashing import Memo

ACCEPT = "accept_prompt_text"
ONLY = "only_answered"
OPTIONS = {ACCEPT: bool, "filtered": bool, "id_field": str, ONLY: bool}
LONG = 16
"""Characters an answer may have per new token before it is noted as longer than the suite lets a
model write (a token is about 4 characters of English; 16 leaves room for long words and code)."""
SHOWN = 3
"""Prompts named for each kind of mismatch (the others are counted)."""
_TOLERANCE = 1e-9  # settings written as JSON numbers compare equal within this


def given_paths(argument: str) -> list[str]:
    """The paths of ``FILE[,FILE...]``: the whole argument when it names a path (lm-evaluation-harness
    0.4.0-0.4.2 put the model's arguments, commas and all, in its file names), else its parts."""
    whole = argument.strip()
    if Path(whole).expanduser().exists():
        return [whole]
    return [part.strip() for part in whole.split(",") if part.strip()]


def answer_paths(argument: str) -> list[Path]:
    """The files ``FILE[,FILE...]`` names (a folder: its ``*.jsonl``), as the user gave them (every
    message names a file so); one clear line for a path that does not exist, is no file or folder,
    or a folder with no answers."""
    files: list[Path] = []
    for given in given_paths(argument):
        path = Path(given).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.glob("*.jsonl") if p.is_file())
            if not found:
                raise ConfigError("the folder holds no *.jsonl files of answers", path=given)
            files.extend(found)
        elif path.is_file():
            files.append(path)
        elif path.exists():
            raise ConfigError("neither a file nor a folder (a named pipe or a device); give a file or a folder of "
                              "answers", path=given)
        else:
            raise ConfigError("no such file or folder of answers", path=given)
    if not files:
        raise ConfigError("answers:FILE needs at least one file or folder", field="--model")
    unique = {p.resolve(): p for p in sorted(files, reverse=True)}  # the same file named twice is read once
    return sorted(unique.values())


def check_answers(model: str, base_url: str | None) -> None:
    """The cheap checks of ``answers:FILE`` before anything runs: its options, and every path."""
    source = MODEL_SOURCES.find(model)
    if source is None or not source.argument:
        raise ConfigError("answers:FILE needs a file or folder of answers", field="--model")
    MODEL_SOURCES.options(source, {})
    if base_url:
        raise ConfigError(f"applies to a served model (--model openai:NAME), not to {model!r}",
                          field="--model-base-url")
    answer_paths(source.argument)


def describe(argument: str, files: Sequence[Path]) -> str:
    """How the run log names the files: one by its name, a folder by its name and count."""
    parts = given_paths(argument)
    if len(parts) == 1 and Path(parts[0]).expanduser().is_dir():
        return f"{Path(parts[0]).name or parts[0]}/ ({len(files)} file{'s' if len(files) != 1 else ''})"
    names = [p.name for p in files]
    return ", ".join(names) if len(names) <= 3 else f"{', '.join(names[:3])} and {len(names) - 3} more"


@MODEL_SOURCES.register(
    "answers", argument="FILE", needs="a file or folder of answers", check=check_answers, options=OPTIONS,
    summary="answers generated elsewhere (pytest-novelty answers, lm-evaluation-harness samples)",
)  # fmt: skip
class AnswerFiles:
    """``--model answers:FILE[?option=value&...]``: answers read from files, as a
    :class:`~pytest_novelty.generation.Generator` that generates nothing and a
    :class:`~pytest_novelty.generation.RecordedAnswers` source (see the module doc)."""

    tokens_generated = 0

    def __init__(
        self,
        argument: str,
        *,
        memo: Memo | None = None,
        accept_prompt_text: bool = False,
        filtered: bool = False,
        id_field: str | None = None,
        only_answered: bool = False,
    ) -> None:
        self.files = answer_paths(argument)
        self.argument = argument
        """The files as the user gave them, which every message names them by."""
        self.only_answered = only_answered
        self.answered: dict[str, frozenset[str]] = {}
        """Each checked suite run's prompts the files answer (all of them unless ``only_answered``)."""
        self.name = ANSWERS_PREFIX + argument
        self.accept_prompt_text = accept_prompt_text
        self.filtered = filtered
        self.id_field = id_field = id_field or None  # ?id_field= (empty) matches by prompt text
        self.source = describe(argument, self.files)
        self.device = self.source
        digests = hash_files(self.files, memo=memo, what="answers")
        total = hashlib.sha256(b"pytest-novelty answers identity 1\0")
        for digest in sorted(digests.values()):
            total.update(f"{digest}\0".encode())
        total.update(f"filtered={filtered}\0id_field={id_field or ''}\0".encode())
        hex_id = total.hexdigest()[:24]
        self.identity_id = ANSWERS_PREFIX + hex_id
        self.identity = Identity(self.identity_id, f"{self.source} @ {hex_id[:8]}", self.name)
        self._records: list[AnswerRecord] | None = None
        self._ours: dict[tuple[str, str], AnswerRecord] = {}  # (suite run, prompt id) -> our record
        self._pooled: dict[str, list[AnswerRecord]] = {}  # prompt text (or id_field value) -> samples
        self._bound: dict[str, tuple[str, ...]] = {}  # prompt key -> its answers
        self._bound_by: dict[str, str] = {}  # prompt key -> the record's place, for conflicts

    def __repr__(self) -> str:
        return f"AnswerFiles({self.name!r}, {len(self.files)} files)"

    # -- the records ----------------------------------------------------------------------------

    @property
    def records(self) -> list[AnswerRecord]:
        """Every record of every file, read on first use."""
        if self._records is None:
            records: list[AnswerRecord] = []
            for file in self.files:
                records.extend(read_answer_file(file, filtered=self.filtered, id_field=self.id_field))
            self._records = records
            self._index()
        return self._records

    def _index(self) -> None:
        """Our records by (suite run, prompt id); lm-evaluation-harness samples by prompt text, or
        by their ``id_field`` value when it is given."""
        assert self._records is not None
        for record in self._records:
            if record.format == FORMAT:
                key = (str(record.suite), str(record.id))
                if key in self._ours:
                    raise ConfigError(f"{record.place}: prompt {record.id!r} of suite {record.suite} is answered "
                                      f"twice (also at {self._ours[key].place}); keep one of them")
                self._ours[key] = record
            else:
                key_of = record.id if self.id_field else record.prompt
                if key_of is not None:
                    self._pooled.setdefault(key_of, []).append(record)

    # -- the RecordedAnswers protocol -----------------------------------------------------------

    def check_prompts(self, request: PromptRequest) -> str:
        """Match every prompt of ``request`` to its record and check it (see the module doc); remember
        its answers for :meth:`sample`. Every mismatch of the run is found before one line reports
        them all (:class:`Mismatches`). Returns the note for the report: prompt texts accepted, the
        subset gated with ``only_answered``, answers longer than the suite lets a model write."""
        self.records  # noqa: B018  (read and indexed on first use)
        mismatches = Mismatches(request, self.argument)
        kept: list[str] = []
        differing = long = 0
        for prompt_id, text in zip(request.ids, request.texts, strict=True):
            record = self._match(request, prompt_id, text, mismatches)
            if record is None:
                continue
            where = f"{record.place}: prompt {prompt_id!r} of suite {request.run}"
            why = contradiction(record.settings, request.settings)
            if why is not None:
                mismatches.add("answered with other settings", prompt_id, f"{record.place}: {why}")
                continue
            if len(record.answers) < request.settings.samples:
                mismatches.add(f"fewer answers than generation.samples = {request.settings.samples}", prompt_id,
                               f"{record.place}: {len(record.answers)}")
                continue
            if record.prompt is not None and record.prompt != text:
                if not self.accept_prompt_text:
                    mismatches.add("another prompt text", prompt_id,
                                   f"{record.place}: {first_difference(record.prompt, text)}")
                    continue
                differing += 1
            long += sum(len(a) > LONG * request.settings.max_new_tokens for a in record.answers)
            self._bind(prompt_key(self.identity_id, text, request.settings), record, where)
            kept.append(prompt_id)
        self._closest(mismatches, request)
        if mismatches and not (self.only_answered and mismatches.only_missing and kept):
            raise ConfigError(mismatches.line(self._missing_hint(request), self.only_answered))
        self.answered[request.run] = frozenset(kept)
        return _note(len(kept), len(request.ids), differing, long, request.settings.max_new_tokens, self.source)

    def _match(self, request: PromptRequest, prompt_id: str, text: str, mismatches: Mismatches) -> AnswerRecord | None:
        own = self._ours.get((request.run, prompt_id))
        if own is not None:
            return own
        # lm-evaluation-harness samples hold one set of answers: the run itself, not its repeats
        pooled = [] if request.repeat else self._pooled.get(prompt_id if self.id_field else text, [])
        if not pooled:
            mismatches.missing[prompt_id] = text
            return None
        agreeing = [r for r in pooled if contradiction(r.settings, request.settings) is None]
        if not agreeing:
            mismatches.add("answered with other settings", prompt_id,
                           f"{pooled[0].place}: {contradiction(pooled[0].settings, request.settings)}")
            return None
        distinct = {r.answers: r for r in agreeing}
        if len(distinct) > 1:
            first, second = list(distinct.values())[:2]
            mismatches.add("answered differently twice (same prompt, same settings: keep one)", prompt_id,
                           f"{first.place} and {second.place}")
            return None
        return agreeing[0]

    def _closest(self, mismatches: Mismatches, request: PromptRequest) -> None:
        """A missing prompt whose text an unmatched lm-evaluation-harness sample nearly has (the same
        first or last 32 characters) is an edited prompt, reported with where the two part."""
        if self.id_field or not mismatches.missing:
            return
        matched = set(self._bound_by.values())
        by_end: dict[str, AnswerRecord] = {}
        for record in self.records:
            if record.format != FORMAT and record.prompt and record.place not in matched:
                by_end.setdefault(record.prompt[:32], record)
                by_end.setdefault(record.prompt[-32:], record)
        for prompt_id, text in list(mismatches.missing.items()):
            near = by_end.get(text[:32]) or by_end.get(text[-32:])
            if near is not None and near.prompt is not None and near.prompt != text:
                del mismatches.missing[prompt_id]
                mismatches.add("another prompt text", prompt_id, f"{near.place}: {first_difference(near.prompt, text)}")

    def _missing_hint(self, request: PromptRequest) -> str:
        """What the files do hold, when a prompt is not among it."""
        records = self.records
        runs = sorted({str(r.suite) for r in records if r.format == FORMAT})
        if runs and request.run not in runs:
            return f"the files answer suites {', '.join(runs[:6])}{did_you_mean(request.run, runs)}"
        if request.repeat and not runs:
            return "a --novelty-repeat run needs answers of its own: pytest-novelty records with its suite name"
        if any(r.format != FORMAT for r in records) and not self.id_field:
            return ("lm-evaluation-harness samples are matched by their exact prompt text; to match by a field "
                    "of the logged doc, add ?id_field=NAME to the answers: spec")
        return ""

    def suites(self) -> set[str]:
        """The suite runs our records answer (lm-evaluation-harness samples name none)."""
        return {str(r.suite) for r in self.records if r.format == FORMAT}

    def _bind(self, key: str, record: AnswerRecord, where: str) -> None:
        known = self._bound.get(key)
        if known is not None and known != record.answers:
            raise ConfigError(f"{where}: the same prompt text with the same settings is answered differently at "
                              f"{self._bound_by[key]}; a model answers one input alike, so keep one of them")
        self._bound[key] = record.answers
        self._bound_by[key] = record.place

    # -- the Generator protocol -----------------------------------------------------------------

    def render(self, model_input: ModelInput) -> str:
        """Plain text as it is; chat messages as :func:`~.answer_files.chat_text` (what a chat
        record's prompt is compared with)."""
        return model_input if isinstance(model_input, str) else chat_text(list(model_input))

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Nothing is tokenised: characters / 4, as for a served model."""
        return [len(t) // 4 + 1 for t in texts]

    def max_rows(self, prompt_tokens: int, settings: GenerationSettings) -> int:
        """Every row at once: reading costs no memory worth counting."""
        return 1 << 20

    def sample(self, batch: Batch) -> list[str]:
        """Each row's answer from the files: its prompt's record (bound by :meth:`check_prompts`),
        the row's sample index (:attr:`Batch.samples`)."""
        if len(batch.samples) != len(batch):
            raise HarnessError(f"{self.name}: a batch without sample indices cannot be read from files")
        out = []
        for row, (text, sample) in enumerate(zip(batch.texts, batch.samples, strict=True)):
            answers = self._bound.get(prompt_key(self.identity_id, text, batch.settings))
            if answers is None:
                raise HarnessError(f"{self.name}: a prompt was asked for before its suite's prompts were checked")
            out.append(answers[sample])
            batch.finished(row, answers[sample])
        batch.step(len(batch), 0)
        return out


class Mismatches:
    """Every mismatch of one suite run's prompts with the files, by kind, for one line (module doc)."""

    def __init__(self, request: PromptRequest, source: str) -> None:
        self.request, self.source = request, source
        self.missing: dict[str, str] = {}
        """Prompts without answers, and their text (an edited prompt is found among them, see ``_closest``)."""
        self.kinds: dict[str, list[tuple[str, str]]] = {}

    def add(self, kind: str, prompt_id: str, detail: str) -> None:
        self.kinds.setdefault(kind, []).append((prompt_id, detail))

    def __bool__(self) -> bool:
        return bool(self.missing or self.kinds)

    @property
    def only_missing(self) -> bool:
        return not self.kinds

    def line(self, hint: str, only_answered: bool) -> str:
        """``FILE: suite story: answers for 6 of 100 prompts; 94 without answers (story-006, ...); ...; fix``."""
        total = len(self.request.ids)
        bad = len(self.missing) + sum(map(len, self.kinds.values()))
        parts = [f"{self.source}: suite {self.request.run}: answers for {total - bad} of {total} prompts"]
        if self.missing:
            ids = list(self.missing)
            parts.append(f"{len(ids)} without answers ({', '.join(ids[:SHOWN])}{', ...' if len(ids) > SHOWN else ''})")
        for kind, found in self.kinds.items():
            shown = "; ".join(f"{i} at {d}" for i, d in found[:SHOWN]) + ("; ..." if len(found) > SHOWN else "")
            parts.append(f"{len(found)} {kind} ({shown})")
        fixes = [hint] if hint and self.missing else []
        if "another prompt text" in self.kinds:
            fixes.append(f"generate the answers from the suite's prompts, or accept theirs with ?{ACCEPT}=true")
        if self.missing and not only_answered:
            fixes.append(f"answer every prompt, or gate only those answered with ?{ONLY}=true")
        return "; ".join(parts) + ("; " + "; ".join(fixes) if fixes else "")


def _note(kept: int, total: int, differing: int, long: int, max_new_tokens: int, source: str) -> str:
    """What the report says of a run's answers: the subset gated, accepted texts, over-long answers."""
    notes = []
    if kept < total:
        notes.append(f"gated on the {kept} of {total} prompts {source} answers ({ONLY}=true)")
    if differing:
        notes.append(f"{differing} of {kept} prompt texts in {source} differ from the ones the suite sends "
                     f"(accepted: {ACCEPT}=true)")
    if long:
        notes.append(f"{long} answers in {source} are longer than generation.max_new_tokens = {max_new_tokens} "
                     "lets a model write (made with other settings?)")
    return "; ".join(notes)


def first_difference(found: str, wanted: str) -> str:
    """Where two prompt texts part, in words: ``at character 12: 'a cat' here, 'a dog' in the suite``."""
    at = next((i for i, (a, b) in enumerate(zip(found, wanted, strict=False)) if a != b), min(len(found), len(wanted)))
    here, there = found[at : at + 20], wanted[at : at + 20]
    return f"at character {at + 1}: {here!r} here, {there!r} in the suite"


def contradiction(recorded: Any, settings: GenerationSettings) -> str | None:
    """How the settings a file records contradict the suite's, in words, or None when they agree.

    Only what the file records is compared: temperature (0 is greedy), top-p, top-k (0: none),
    new tokens, and stop strings (each one the answers stopped at must be one the suite stops at:
    others would cut answers the suite lets run on; stops the suite adds cut them afterwards).
    """
    suite = {"temperature": settings.temperature, "top_p": settings.top_p, "top_k": settings.top_k,
             "max_new_tokens": settings.max_new_tokens}
    for name, value in suite.items():
        if name in recorded and not abs(float(recorded[name]) - float(value)) <= _TOLERANCE:  # NaN never agrees
            given = "0 (greedy)" if name == "temperature" and not recorded[name] else f"{recorded[name]:g}"
            return f"{name} {given}; the suite has {value:g} (generation.{name})"
    extra = [s for s in recorded.get("stop", ()) if s not in settings.stop]
    if extra:
        return (f"the stop string {extra[0]!r}, which the suite does not stop at (it stops at "
                f"{', '.join(repr(s) for s in settings.stop) or 'nothing but the end of text'})")
    return None
