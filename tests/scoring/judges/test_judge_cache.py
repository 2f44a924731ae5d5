"""The on-disk answer cache."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

from pytest_novelty.scoring.judges.cache import NAMESPACE, AnswerCache, answer_key


def test_keys_depend_on_every_part() -> None:
    base = ("openai:m", "story/1", "prompt", "response", 0)
    keys = {answer_key(*base)}
    for i in range(len(base)):
        changed = list(base)
        changed[i] = "other" if isinstance(base[i], str) else 1
        keys.add(answer_key(*changed))
    assert len(keys) == len(base) + 1
    assert answer_key(*base) == answer_key(*base)


def test_values_survive_a_new_instance(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path)
    cache.put("k1", {"score": 4.0, "reply": "Score: 4"})
    cache.put("k2", {"score": None, "error": "no score"})
    cache.close()
    again = AnswerCache(tmp_path)
    assert again.get_many(["k1", "k2", "k3"]) == {
        "k1": {"score": 4.0, "reply": "Score: 4"},
        "k2": {"score": None, "error": "no score"},
    }
    assert len(again) == 2 and (tmp_path / NAMESPACE).exists()


def test_memory_cache_without_a_folder() -> None:
    cache = AnswerCache(None)
    cache.put("k", {"score": 1.0})
    assert cache.get("k") == {"score": 1.0} and cache.get("missing") is None


def test_threads_write_concurrently(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path)

    def write(start: int) -> None:
        for i in range(start, start + 50):
            cache.put(f"k{i}", {"i": i})

    threads = [threading.Thread(target=write, args=(n * 50,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache.get_many(f"k{i}" for i in range(200))) == 200


def _write_in_process(folder: str, start: int) -> None:
    cache = AnswerCache(folder)
    for i in range(start, start + 30):
        cache.put(f"k{i}", {"i": i})


def test_processes_share_one_folder(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_in_process, args=(str(tmp_path), n * 30)) for n in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert len(AnswerCache(tmp_path)) == 60
