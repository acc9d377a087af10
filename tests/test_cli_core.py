"""The CLI on the core install: every command's --help without torch and the other heavy
extras, one flag name per meaning (old spellings warn), listener options, `vocalgrad list`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vocalgrad.cli import main, parser
from vocalgrad.cli.options import key_value

HEAVY = ("torch", "transformers", "ray", "peft", "fastapi", "uvicorn", "ctranslate2", "httpx")
# Block the heavy extras the way a core-only install lacks them: `import torch` raises.
BLOCK = (
    "import sys\n"
    "class _Missing:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in {heavy!r}:\n"
    "            raise ModuleNotFoundError(f'No module named {{name!r}}', name=name)\n"
    "sys.meta_path.insert(0, _Missing())\n"
)


def _commands() -> list[list[str]]:
    sub = next(a for a in parser()._actions if a.dest == "command")
    out = []
    for name, p in sub.choices.items():
        out.append([name])
        for action in p._actions:
            if (
                action.dest == "human_command"
                or getattr(action, "choices", None)
                and isinstance(action.choices, dict)
            ):
                out += [[name, child] for child in action.choices]
    return out


def test_every_command_has_help_without_the_heavy_extras():
    commands = _commands()
    assert len(commands) >= 12  # build ... list, and the human sub-commands
    script = BLOCK.format(heavy=HEAVY) + (
        "from vocalgrad.cli import main\n"
        "import contextlib, io\n"
        f"for argv in {commands!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            main([*argv, '--help'])\n"
        "        except SystemExit as e:\n"
        "            assert e.code == 0, (argv, e.code)\n"
        "import sys\n"
        f"loaded = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "print('ok', len(" + repr(commands) + "))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok")


def test_a_heavy_command_without_its_extra_names_the_extra(tmp_path):
    script = BLOCK.format(heavy=HEAVY) + (
        "from vocalgrad.cli import main\n"
        f"raise SystemExit(main(['finetune', {str(tmp_path)!r}, '--listener', 'whisper:tiny.en',"
        " '--train-dimensions', 'volume']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "pip install" in done.stderr and "vocalgrad[" in done.stderr


def test_old_flag_spellings_work_with_a_warning(capsys):
    args = parser().parse_args(["build", "--out", "x", "--format", "comparison"])
    assert args.question_format == "comparison"
    assert "--format is deprecated" in capsys.readouterr().err
    assert parser().parse_args(["build", "--out", "x", "--no-constant"]).constants == 0
    assert "use --constants 0" in capsys.readouterr().err
    assert parser().parse_args(["build", "--out", "x"]).constants is None  # the config's 3
    args = parser().parse_args(["score", "run", "--format", "csv"])
    assert args.output_format == "csv"
    args = parser().parse_args(["report", "run", "--format", "md"])
    assert args.output_format == "md"
    args = parser().parse_args(["eval", "d", "--listener", "openai:m", "--base-url", "http://h/v1"])
    assert args.base_url == "http://h/v1"
    assert "use -O base_url=URL" in capsys.readouterr().err
    args = parser().parse_args(["human", "invite", "--study", "s.toml", "--base-url", "https://h"])
    assert args.public_url == "https://h"
    args = parser().parse_args(["human", "progress", "--study", "s.toml", "--json"])
    assert args.output_format == "json"
    assert capsys.readouterr().err.count("deprecated") == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["build", "--out", "x"],
        ["eval", "d", "--listener", "baseline:ideal"],
        ["probe", "d", "--listener", "whisper:tiny.en"],
        ["export", "lmms-eval", "d", "--out", "o"],
    ],
)
def test_dimensions_is_the_option_and_categories_its_deprecated_alias(capsys, argv):
    assert parser().parse_args([*argv, "--dimensions", "volume,echo"]).categories == (
        "volume",
        "echo",
    )
    assert capsys.readouterr().err == ""
    assert parser().parse_args([*argv, "--categories", "echo"]).categories == ("echo",)
    err = capsys.readouterr().err
    assert "--categories is deprecated" in err and "use --dimensions" in err


def test_build_takes_per_speaker_test_and_min_duration_into_its_config(monkeypatch, tmp_path):
    """The build's advice names --per-speaker-test, and --min-duration works on `build` as on
    `sources`: both reach the `BuildConfig` the build runs with."""
    import vocalgrad.api as api
    from vocalgrad.errors import ConfigError, SourceError
    from vocalgrad.sources.selection import select_sources

    seen = {}

    def fake_build(
        out, source, *, config=None, protocol=None, overwrite, audit, executor, **options
    ):
        seen["config"] = api._build_config(config, protocol, source, dict(options))
        raise ConfigError("stop here")

    monkeypatch.setattr(api, "build", fake_build)
    argv = ["build", "--out", str(tmp_path / "b"), "--per-speaker-test", "3"]
    assert main([*argv, "--min-duration", "1.5", "--no-audit"]) == 2
    assert seen["config"].per_speaker_test == 3 and seen["config"].min_duration_s == 1.5
    with pytest.raises(SourceError, match=r"raise per_speaker_test \(--per-speaker-test\)"):
        select_sources([], n_test=4, n_train=0)


def test_an_unknown_dimension_names_the_setting_dimensions_not_categories(tmp_path, capsys):
    assert main(["build", "--out", str(tmp_path / "b"), "--dimensions", "volumne"]) == 2
    err = capsys.readouterr().err
    assert "config key dimensions = ['volumne']: unknown dimension 'volumne'" in err
    assert "categories" not in err


def test_finetune_takes_train_dimensions_and_the_old_spelling(capsys):
    argv = ["finetune", "d", "--listener", "whisper:tiny.en"]
    assert parser().parse_args([*argv, "--train-dimensions", "volume"]).train_categories == (
        "volume",
    )
    assert capsys.readouterr().err == ""
    assert parser().parse_args([*argv, "--train-categories", "echo"]).train_categories == ("echo",)
    assert "use --train-dimensions" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser().parse_args(argv)
    assert "--train-dimensions is required" in capsys.readouterr().err


def test_one_default_for_one_meaning():
    defaults = {}
    for argv in (["score", "r"], ["report", "r"], ["probe", "d", "--listener", "x:y"]):
        defaults[argv[0]] = parser().parse_args(argv).n_boot
    assert len(set(defaults.values())) == 1, defaults


def test_listener_options_are_typed_key_values():
    args = parser().parse_args(
        [
            "eval",
            "d",
            "--listener",
            "hf:m",
            "-O",
            "device=cuda",
            "-O",
            "logprobs=true",
            "--listener-option",
            "timeout=2.5",
            "-O",
            "top-logprobs=5",
        ]
    )
    assert dict(args.listener_options) == {
        "device": "cuda",
        "logprobs": True,
        "timeout": 2.5,
        "top_logprobs": 5,
    }
    with pytest.raises(Exception, match="KEY=VALUE"):
        key_value("device")


@pytest.mark.parametrize(
    "what,expected",
    [
        ("listeners", "baseline:..."),
        ("dimensions", "voice_pitch"),
        ("formats", "comparison"),
        ("prompts", "ternary"),
    ],
)
def test_list(what, expected, capsys):
    assert main(["list", what]) == 0
    assert expected in capsys.readouterr().out


def test_the_eval_count_line_says_asked_afresh_and_from_cache_apart():
    """24 answered from the cache in 0.0 s read as "asked 24": the line now splits them."""
    from pathlib import Path

    from vocalgrad.cli.evaluate import count_line

    counts = {"answered": 24, "from_cache": 24, "skipped_done": 0, "retried": 0, "errors": 0,
              "seconds": 0.01}  # fmt: skip
    line = count_line("openai:stub", counts, Path("runs/x"))
    assert line.startswith("openai:stub: asked 0 afresh and 24 answered from cache (0 already")
    assert line.endswith("in 0.0 s -> runs/x")
    counts = {**counts, "from_cache": 0, "answered": 5}
    assert count_line("m", counts, Path("o")).startswith("m: asked 5 (0 already done, ")


def test_a_vocalgrad_warning_reads_as_one_line_and_another_packages_keeps_its_form(capsys):
    """The CLI prints what vocalgrad warns like its errors; a third party's warning still
    names the file it comes from."""
    import warnings
    from pathlib import Path

    import vocalgrad
    from vocalgrad.cli import _show_warning

    ours = str(Path(vocalgrad.__file__).parent / "listeners" / "whisper.py")
    _show_warning(UserWarning("whisper:tiny is read as whisper:tiny.en"), UserWarning, ours, 1)
    theirs = str(Path(warnings.__file__))
    _show_warning(UserWarning("something else"), UserWarning, theirs, 7)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "vocalgrad: warning: whisper:tiny is read as whisper:tiny.en"
    assert err[1].startswith(theirs) and "UserWarning: something else" in err[1]
