"""lmms-eval on tasks written by `vocalgrad export lmms-eval`: two lmms-eval models registered
through the `lmms_eval.models` entry point of a plug-in made here (an oracle chat model and a
simple model that answers from the decoded clip) run via `simple_evaluate` with the exported
folder as include path; the numbers equal `vocalgrad score` on the same answers. The export and
lm-eval's result layout need no lmms-eval and are tested without it."""

from __future__ import annotations

import importlib
import json
import math
import shutil
import sys
from pathlib import Path

import pytest

from vocalgrad.cli import main
from vocalgrad.dataset import load_rows
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import AnswerCache, EvalConfig
from vocalgrad.evaluation.evaluate import evaluate as vocalgrad_eval
from vocalgrad.evaluation.score import score_run
from vocalgrad.harness.export import export_lmms_eval
from vocalgrad.harness.items import question, write_run
from vocalgrad.harness.lm_eval_layout import write_lm_eval_layout
from vocalgrad.listeners.baselines import ConstantListener
from vocalgrad.questions.prompts import build_prompt
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig

pytestmark = pytest.mark.usefixtures("builtin_cache")

PLUGIN = '''
import hashlib, json
import numpy as np, soundfile as sf
from lmms_eval.api.model import lmms
from lmms_eval.models.registry_v2 import ModelManifest
from lmms_eval.protocol import ChatMessages


def key(audio, sr):
    return hashlib.sha256(np.ascontiguousarray(audio).tobytes() + str(sr).encode()).hexdigest()


class _Answerer(lmms):
    def __init__(self, clips, **kwargs):
        super().__init__()
        self.clips = json.loads(open(clips).read())
        self.heard = []

    def answer(self, audio, sr, text):
        entry = self.clips[key(audio, sr)]  # KeyError: the model was not sent a clip, sample for sample
        assert text in entry["questions"], "not the question vocalgrad eval asks"
        self.heard.append(entry["item_id"])
        return entry[self.kind]

    def loglikelihood(self, requests):
        raise NotImplementedError

    def generate_until_multi_round(self, requests):
        raise NotImplementedError


class OracleChat(_Answerer):
    """Reads the typed messages the way chat adapters do (extract_media)."""
    is_simple = False
    kind = "oracle"

    def generate_until(self, requests):
        out = []
        for ctx, doc_to_messages, gen_kwargs, doc_id, task, split in [r.args for r in requests]:
            messages = ChatMessages(messages=doc_to_messages(self.task_dict[task][split][doc_id]))
            images, videos, audios = messages.extract_media()
            assert not images and not videos and len(audios) == 1
            text = [c.text for c in messages.messages[0].content if c.type == "text"]
            audio, sr = sf.read(audios[0], dtype="int16")
            out.append(self.answer(audio, sr, text[0]))
        return out


class MixedSimple(_Answerer):
    """Takes the decoded clip from doc_to_visual, as simple audio adapters do."""
    kind = "mixed"

    def generate_until(self, requests):
        out = []
        for ctx, gen_kwargs, doc_to_visual, doc_id, task, split in [r.args for r in requests]:
            (visual,) = doc_to_visual(self.task_dict[task][split][doc_id])
            assert visual["type"] == "audio" and visual["array"].dtype == np.float32
            pcm = np.round(visual["array"] * 32768).astype(np.int16)
            out.append(self.answer(pcm, visual["sampling_rate"], ctx))
        return out


MANIFESTS = [
    ModelManifest(model_id="vocalgrad_test_oracle", chat_class_path="vocalgrad_lmms_plugin.OracleChat"),
    ModelManifest(model_id="vocalgrad_test_mixed", simple_class_path="vocalgrad_lmms_plugin.MixedSimple"),
]
'''  # noqa: E501 (plugin source written out verbatim)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lmms") / "gradual"
    config = BuildConfig(
        n_test=2,
        n_train=0,
        categories=("volume", "voice_pitch"),
        tiers=("high",),
        curves=("linear", "jump"),
        constants=0,
    )
    build(config, out, workers=1, audit=False)
    return out


@pytest.fixture(scope="module")
def plugin(tmp_path_factory, dataset) -> Path:
    """A package installed the way pip installs one: a module plus a dist-info whose
    entry_points.txt declares the models, on sys.path; lmms-eval's registry reloads them."""
    import soundfile as sf

    pytest.importorskip(
        "lmms_eval",
        reason="lmms-eval is not installed: pip install -c constraints/cpu-torch.txt "
        "-e '.[lmms]' && pip install --no-deps 'lmms-eval>=0.7,<0.8' (docs/harnesses.md)",
    )
    root = tmp_path_factory.mktemp("plugin")
    (root / "vocalgrad_lmms_plugin.py").write_text(PLUGIN)
    info = root / "vocalgrad_lmms_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: vocalgrad-lmms-plugin\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        "[lmms_eval.models]\nvocalgrad_test = vocalgrad_lmms_plugin:MANIFESTS\n"
    )
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    sys.modules.pop("vocalgrad_lmms_plugin", None)
    from lmms_eval.models import MODEL_REGISTRY_V2

    MODEL_REGISTRY_V2.load_entrypoint_manifests(overwrite=True)
    clips = {}
    for row in load_rows(dataset):
        audio, sr = sf.read(row["path"], dtype="int16")
        words = {lab: w for w, lab in build_prompt(row["category"]).label_of.items()}
        mixed = (
            words[row["direction"]]
            if row["category"] == "voice_pitch"
            else ""
            if row["direction"] == "increase"
            else "increase"
        )  # right; empty; biased
        clips[_key(audio, sr)] = {
            "item_id": row["item_id"],
            "questions": [question(row, v) for v in ("default", "swapped")],
            "oracle": words[row["direction"]],
            "mixed": mixed,
        }
    (root / "clips.json").write_text(json.dumps(clips))
    yield root
    sys.path.remove(str(root))


def _key(audio, sr) -> str:
    import hashlib

    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(audio).tobytes() + str(sr).encode()).hexdigest()


@pytest.fixture(scope="module")
def tasks(dataset, tmp_path_factory) -> Path:
    """Exported, then moved elsewhere (as to the GPU machine): every test runs on the moved
    folder, so none passes on a path that only the export's own location resolves."""
    out = tmp_path_factory.mktemp("tasks") / "exported"
    assert (
        main(
            [
                "export",
                "lmms-eval",
                str(dataset),
                "--out",
                str(out),
                "--variants",
                "default,swapped",
            ]
        )
        == 0
    )
    moved = tmp_path_factory.mktemp("elsewhere") / "tasks"
    shutil.move(out, moved)
    return moved


def evaluate(model: str, plugin: Path, tasks: Path, task: str, monkeypatch) -> dict:
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.tasks import TaskManager

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return simple_evaluate(
        model=model,
        model_args=f"clips={plugin / 'clips.json'}",
        tasks=[task],
        task_manager=TaskManager(include_path=str(tasks)),
        log_samples=True,
        bootstrap_iters=0,
        batch_size=1,
    )


def test_export_writes_a_task_per_format_and_variant(tasks, dataset):
    meta = json.loads((tasks / "vocalgrad_export.json").read_text())
    assert meta["tasks"] == ["vocalgrad_gradual", "vocalgrad_gradual_swapped"]
    yaml = (tasks / "vocalgrad_gradual" / "vocalgrad_gradual.yaml").read_text()
    assert "doc_to_messages: !function vocalgrad_task.doc_to_messages" in yaml
    assert "doc_to_text: !function vocalgrad.harness.lmms_tasks.doc_to_text" in yaml
    assert (
        "doc_to_audio" not in yaml
    )  # lmms-eval's config rejects it: audio goes through doc_to_visual
    docs = [
        json.loads(line)
        for line in (tasks / "vocalgrad_gradual" / "docs.jsonl").read_text().splitlines()
    ]
    assert len(docs) == len(load_rows(dataset)) and all(
        Path(d["path"]).suffix == ".wav" for d in docs
    )
    assert all(not Path(d["path"]).is_absolute() and (tasks / d["path"]).is_file() for d in docs)


def test_export_refuses_what_it_cannot_ask(dataset, tmp_path):
    with pytest.raises(ConfigError, match="no items match"):
        export_lmms_eval(dataset, tmp_path, tiers=("low",))
    with pytest.raises(ConfigError, match="needs two channels"):
        export_lmms_eval(dataset, tmp_path, categories=("stereo_direction",))


def test_oracle_chat_model_by_entry_point(plugin, tasks, dataset, monkeypatch):
    out = evaluate("vocalgrad_test_oracle", plugin, tasks, "vocalgrad_gradual_swapped", monkeypatch)
    r = out["results"]["vocalgrad_gradual_swapped"]
    assert (
        r["accuracy,none"] == 1.0 and r["unparsed_rate,none"] == 0.0 and r["empty_rate,none"] == 0.0
    )
    assert r["accuracy_volume,none"] == r["accuracy_voice_pitch,none"] == 1.0
    assert r["dprime,none"] > 2
    assert len(out["samples"]["vocalgrad_gradual_swapped"]) == len(load_rows(dataset))


def test_numbers_equal_vocalgrad_score(plugin, tasks, dataset, monkeypatch, tmp_path):
    """Right on pitch, an empty answer or "increase" on volume: lmms-eval's aggregation, a run
    written from its samples and scored by `vocalgrad score`, and lm-eval's layout agree."""
    out = evaluate("vocalgrad_test_mixed", plugin, tasks, "vocalgrad_gradual", monkeypatch)
    r = out["results"]["vocalgrad_gradual"]
    rows = [s["accuracy"] for s in out["samples"]["vocalgrad_gradual"]]
    run = write_run(
        tmp_path / "run", dataset, rows, listener="vocalgrad_test_mixed", harness="lmms-eval"
    )
    table = next(iter(score_run(run)["groups"].values()))["table"]
    overall = table[0]
    assert 0 < overall["unparsed_rate"] < 1 and r["empty_rate,none"] == overall["unparsed_rate"]
    for metric in (
        "accuracy",
        "accuracy_lo",
        "accuracy_hi",
        "dprime",
        "criterion",
        "unparsed_rate",
    ):
        assert _same(r[f"{metric},none"], overall[metric]), metric
    for g in table[1:]:
        for metric in ("accuracy", "dprime", "criterion"):
            assert _same(r[f"{metric}_{g['category']},none"], g[metric]), (metric, g["category"])
    assert r["accuracy_stderr_clustered,none"] != "N/A"  # lmms-eval's own, over source clusters

    results, *samples = write_lm_eval_layout(run, tmp_path / "lm-eval", date="2026-01-01T00-00-00")
    assert (
        results.name == "results_2026-01-01T00-00-00.json"
        and results.parent.name == "vocalgrad_test_mixed"
    )
    layout = json.loads(results.read_text())["results"]["vocalgrad_gradual"]
    for metric in ("accuracy", "dprime", "criterion", "unparsed_rate"):
        assert _same(layout[f"{metric},none"], overall[metric])
    (path,) = samples
    assert path.name == "samples_vocalgrad_gradual_2026-01-01T00-00-00.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert (
        len(lines) == len(rows)
        and sum(s["accuracy"] for s in lines) / len(lines) == overall["accuracy"]
    )


def _same(a, b) -> bool:
    a, b = (float("nan") if v is None else v for v in (a, b))
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)


def test_lm_eval_layout_of_a_vocalgrad_eval_run(dataset, tmp_path):
    """A native run (always "increase") in lm-eval's layout: its numbers are `vocalgrad score`'s."""
    run = tmp_path / "run"
    vocalgrad_eval(
        dataset,
        ConstantListener("increase"),
        run,
        EvalConfig(variants=("default", "swapped")),
        cache=AnswerCache(tmp_path / "answers.sqlite"),
    )
    results, *samples = write_lm_eval_layout(run, tmp_path / "out", date="d")
    doc = json.loads(results.read_text())
    groups = score_run(run)["groups"]
    assert sorted(doc["results"]) == [
        "vocalgrad_gradual_choice",
        "vocalgrad_gradual_swapped_choice",
    ]
    for key, task in (
        ("default/choice", "vocalgrad_gradual_choice"),
        ("swapped/choice", "vocalgrad_gradual_swapped_choice"),
    ):
        overall = groups[key]["table"][0]
        assert doc["results"][task]["accuracy,none"] == overall["accuracy"] == 0.5
        assert _same(doc["results"][task]["criterion,none"], overall["criterion"])
        assert doc["n-samples"][task]["effective"] == overall["n"]
    assert sorted(p.name for p in samples) == [
        "samples_vocalgrad_gradual_choice_d.jsonl",
        "samples_vocalgrad_gradual_swapped_choice_d.jsonl",
    ]
    with pytest.raises(ConfigError, match="choose one listener"):
        write_lm_eval_layout(run, tmp_path / "out", listener="someone-else")
