"""The shell launcher reader: real launcher shapes, read as bash would, with exact words, spans and problems."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from trainlint.diagnostics import Span
from trainlint.launch.model import Invocation, Word
from trainlint.launch.shell import looks_like_launcher, read_markdown, read_shell, world_size

FIXTURES = Path(__file__).parent / "fixtures" / "launch" / "shell"


def fixture(name: str, as_path: str | None = None, read=None):
    return read_shell((FIXTURES / name).read_text(), Path(as_path or name), read)


def only(reading) -> Invocation:
    assert len(reading.invocations) == 1, reading.invocations
    return reading.invocations[0]


def shell(text: str, name: str = "run.sh", read=None):
    return read_shell(textwrap.dedent(text), Path(name), read)


def texts(words) -> list[str | None]:
    return [w.text for w in words]


def at(word: Word | None) -> tuple:
    assert word is not None
    s = word.span
    return s.line, s.col, s.end_line, s.end_col


def origin(word: Word | None) -> tuple | None:
    assert word is not None
    s = word.origin
    return None if s is None else (s.line, s.col, s.end_line, s.end_col)


def opt(inv: Invocation, name: str) -> str | None:
    word = inv.option(name)
    return None if word is None else word.text


# ---- the shapes of real launchers -----------------------------------------------------------------------------
def test_fastchat_deepspeed_lora_launcher_reads_every_continued_flag():
    inv = only(fixture("fastchat_train_lora.sh"))
    assert inv.launcher == "deepspeed"
    assert inv.span == Span(2, 1, 17, 23)
    assert inv.script.text == "fastchat/train/train_lora.py" and at(inv.script) == (2, 24, 2, 52)
    assert [(n, w.text) for n, w in inv.options] == [("num_gpus", "4")]
    assert at(inv.option("num_gpus")) == (2, 22, 2, 23)
    assert texts(inv.args) == [
        "--model_name_or_path", "lmsys/vicuna-7b-v1.5", "--lora_r", "8", "--lora_alpha", "16", "--data_path", None,
        "--output_dir", "./checkpoints", "--bf16", "True", "--per_device_train_batch_size", "4",
        "--gradient_accumulation_steps", "2", "--evaluation_strategy", "no", "--learning_rate", "2e-5",
        "--model_max_length", "2048", "--q_lora", "False", "--deepspeed", "playground/zero2.json",
        "--gradient_checkpointing", "True", "--flash_attn", "False"]
    assert at(inv.args[0]) == (3, 5, 3, 25) and at(inv.args[1]) == (3, 26, 3, 46)
    data = inv.args[7]
    assert data.raw == "$DATA_PATH" and at(data) == (6, 17, 6, 27) and data.note == "DATA_PATH is not set in this file"
    quoted = inv.args[17]
    assert quoted.text == "no" and quoted.raw == '"no"' and at(quoted) == (11, 27, 11, 31)
    assert at(inv.args[-1]) == (17, 18, 17, 23)
    assert inv.cwd == "" and inv.module is None
    assert world_size(inv) == 4


def test_qwen_torchrun_expands_the_files_variables_and_keeps_dollar_one_unknown():
    reading = fixture("qwen_finetune_lora_ds.sh")
    assert reading.problems == ()
    inv = only(reading)
    assert inv.launcher == "torchrun" and inv.script.text == "finetune.py" and at(inv.script) == (22, 28, 22, 39)
    assert [(n, w.text) for n, w in inv.options] == [
        ("nproc_per_node", "8"), ("nnodes", "1"), ("node_rank", "0"), ("master_addr", "localhost"),
        ("master_port", "6001")]
    nproc = inv.option("nproc_per_node")
    # the word arrived through $DISTRIBUTED_ARGS; its value is written at GPUS_PER_NODE=8
    assert nproc.raw == "$DISTRIBUTED_ARGS" and at(nproc) == (22, 10, 22, 27) and origin(nproc) == (5, 15, 5, 16)
    model = inv.args[1]
    assert (model.text, model.raw, at(model), origin(model)) == ("Qwen/Qwen-7B", "$MODEL", (23, 26, 23, 32),
                                                                  (11, 8, 11, 20))
    data = inv.args[3]
    assert (data.text, data.raw, data.note) == (None, "$DATA", "$1 is set by the caller")
    assert texts(inv.args[4:]) == ["--bf16", "True", "--output_dir", "output_qwen", "--per_device_train_batch_size",
                                   "2", "--gradient_accumulation_steps", "8", "--model_max_length", "512",
                                   "--use_lora", "--gradient_checkpointing", "--deepspeed",
                                   "finetune/ds_config_zero2.json"]
    assert [(n, w.text, at(w)) for n, w in inv.env] == [("CUDA_DEVICE_MAX_CONNECTIONS", "1", (2, 36, 2, 37))]
    assert world_size(inv) == 8


def test_openrlhf_heredoc_command_splits_into_words_that_keep_their_heredoc_positions():
    inv = only(fixture("openrlhf_train_sft.sh"))
    assert (inv.launcher, inv.module, inv.script) == ("deepspeed", "openrlhf.cli.train_sft", None)
    assert inv.options == (("module", None),)
    assert texts(inv.args) == ["--max_len", "4096", "--dataset", "Open-Orca/OpenOrca", "--train_batch_size", "256",
                               "--micro_train_batch_size", "2", "--pretrain", "meta-llama/Meta-Llama-3-8B",
                               "--zero_stage", "2", "--bf16", "--flash_attn", "--gradient_checkpointing"]
    for word in inv.args:  # written as $training_commands in the command, each one somewhere in the heredoc
        assert word.raw == "$training_commands" and at(word) == (18, 24, 18, 42)
    assert origin(inv.args[0]) == (5, 4, 5, 13) and origin(inv.args[1]) == (5, 14, 5, 18)
    pretrain = inv.args[9]
    assert origin(pretrain) == (9, 27, 9, 53)
    assert pretrain.note == "the default of ${PRETRAIN:-...}: PRETRAIN is not set in this file"
    assert world_size(inv) is None  # deepspeed without --num_gpus uses every GPU of the machine


def test_slurm_srun_bash_c_accelerate_launch_reads_the_strings_and_the_sbatch_header():
    reading = fixture("handbook_launch.slurm")
    assert reading.problems == ()
    inv = only(reading)
    assert inv.launcher == "srun accelerate launch"
    assert inv.span == Span(47, 8, 47, 53)
    assert (inv.script.text, inv.script.raw, at(inv.script), origin(inv.script)) == (
        "scripts/sft.py", "$CMD", (47, 43, 47, 47), (37, 5, 37, 19))
    assert [n for n, _ in inv.options] == ["config_file", "num_machines", "num_processes", "machine_rank",
                                           "rdzv_backend"]
    config = inv.option("config_file")
    assert (config.text, config.raw, origin(config)) == ("recipes/accelerate_configs/zero3.yaml", "$LAUNCHER",
                                                         (40, 19, 40, 56))
    machines = inv.option("num_machines")
    assert machines.text == "2" and origin(machines) == (3, 17, 3, 18)  # #SBATCH --nodes=2
    assert "#SBATCH --nodes" in machines.note
    assert opt(inv, "num_processes") == "16"  # $(($NUM_NODES*$GPUS_PER_NODE))
    rank = inv.option("machine_rank")
    assert rank.text is None and rank.note == "SLURM_PROCID is set by Slurm when the job runs"
    assert opt(inv, "rdzv_backend") == "c10d"
    assert texts(inv.args) == ["--config", "recipes/Llama-3.1-8B/sft/config.yaml"]
    assert inv.args[1].note.startswith("the default of ${MODEL:-...}; the caller may set MODEL instead")
    # `--model` is not passed in the run as documented: MODEL stays "" and takes the default, an assumption
    assert [x.said() for x in inv.args[1].assumed] == ["MODEL=Llama-3.1-8B, the default at handbook_launch.slurm:30"]
    assert dict(inv.env)["ACCELERATE_LOG_LEVEL"].text == "info"
    assert [(n, w.text if w else None) for n, w in inv.job_options] == [
        ("wait", "60"), ("kill_on_bad_exit", "1"), ("nodes", "2"),
        ("job_name", "sft"), ("nodes", "2"), ("ntasks_per_node", "1"), ("gres", "gpu:8"), ("exclusive", None),
        ("output", "./logs/%x-%j.out")]
    assert at(inv.job_option("ntasks_per_node")) == (4, 27, 4, 28)
    assert world_size(inv) == 16


def test_cd_before_the_launch_sets_the_working_directory():
    reading = fixture("cd_then_launch.sh", "scripts/cd_then_launch.sh")
    assert [(i.script.text, i.cwd) for i in reading.invocations] == [
        ("train.py", "examples/sft"), ("prepare.py", "tools"), ("launch_again.py", "scripts")]
    first = reading.invocations[0]
    assert first.options == (("u", None),)
    out = first.args[1]
    assert (out.text, out.raw, out.note) == (None, '"$OUT"', "the output of a command (`$(...)`)")
    assert shell("cd $WORKDIR\npython t.py\n").invocations[0].cwd is None


def test_backslash_space_ends_the_command_and_drops_the_flags_after_it():
    reading = fixture("broken_continuation.sh")
    inv = only(reading)
    assert texts(inv.args) == ["--model_name_or_path", "gpt2", " "]
    assert inv.args[2].raw == "\\ " and inv.span == Span(1, 1, 2, 33)
    [problem] = reading.problems
    assert problem.span == Span(2, 31, 2, 33)
    assert "the next line (`--gradient_checkpointing ...`) runs as a separate command" in problem.message


def test_flag_equals_value_splits_at_the_equals_sign_with_the_values_own_span():
    inv = only(shell("torchrun --nproc-per-node=4 --nnodes=2 --master_port=$PORT train.py --lr=2e-5\n"))
    nproc = inv.option("nproc_per_node")
    assert (nproc.text, nproc.raw, at(nproc)) == ("4", "4", (1, 27, 1, 28))
    assert at(inv.option("nnodes")) == (1, 38, 1, 39)
    port = inv.option("master_port")
    assert (port.text, port.raw, port.note) == (None, "$PORT", "PORT is not set in this file")
    assert texts(inv.args) == ["--lr=2e-5"] and at(inv.args[0]) == (1, 69, 1, 78)  # the script's own: kept whole
    assert world_size(inv) == 8
    ds = only(shell("deepspeed --include=localhost:0,1 --master_port=29501 train.py\n"))
    assert opt(ds, "include") == "localhost:0,1" and world_size(ds) == 2


def test_readme_fenced_blocks_are_read_in_the_markdown_files_coordinates():
    reading = read_markdown((FIXTURES / "README.md").read_text(), Path("README.md"))
    assert reading.problems == ()
    torchrun, accelerate = reading.invocations
    assert torchrun.launcher == "torchrun" and torchrun.span == Span(13, 1, 14, 62)
    model = torchrun.args[1]  # exported in the first block, used in the second (no info string)
    assert (model.text, model.raw, at(model), origin(model)) == ("meta-llama/Llama-2-7b-hf", "$MODEL",
                                                                  (14, 26, 14, 32), (7, 14, 7, 38))
    assert world_size(torchrun) == 8
    assert accelerate.launcher == "accelerate launch" and accelerate.span == Span(20, 3, 20, 81)  # `$ ` stripped
    assert at(accelerate.option("config_file")) == (20, 35, 20, 53)
    assert texts(accelerate.args) == ["--config", "recipe.yaml"]


def test_markdown_block_in_another_language_counts_only_when_it_launches():
    md = "Run:\n\n```text\npython eval.py --split test\n```\n\n```python\nos.system('python train.py')\n```\n"
    [inv] = read_markdown(md, Path("README.md")).invocations
    assert inv.script.text == "eval.py" and inv.span == Span(4, 1, 4, 28)
    crlf = read_markdown("```sh\r\npython a.py --x 1\r\n```\r\n", Path("R.md"))
    assert texts(only(crlf).args) == ["--x", "1"] and crlf.problems == ()


def test_a_diff_block_is_read_as_the_command_after_the_change():
    # a README shows a flag to add as a diff; the added line has no backslash of its own, the command goes on
    md = ("Align the EOS token:\n\n```diff\n# for Qwen base models\naccelerate launch src/sft.py \\\n"
          "    --model_name_or_path Qwen/Qwen2.5-1.5B \\\n+   --eos_token '<|im_end|>'\n-   --old_flag 1 \\\n"
          "    --use_liger_kernel \\\n    --output_dir out\n```\n")
    [inv] = read_markdown(md, Path("README.md")).invocations
    words = texts(inv.args)
    assert inv.script.text == "src/sft.py"
    assert "--eos_token" in words and "--use_liger_kernel" in words and "--output_dir" in words
    assert "--old_flag" not in words and "+" not in words
    eos = inv.args[words.index("--eos_token")]
    assert (eos.span.line, eos.span.col) == (7, 5)  # where it is written in the README, the `+` blanked


# ---- not launches ---------------------------------------------------------------------------------------------
def test_python_c_pip_install_and_echo_are_not_launches():
    reading = fixture("not_launches.sh")
    assert reading.invocations == () and reading.problems == ()


# ---- bad input ----------------------------------------------------------------------------------------------
def test_unterminated_quote_is_a_problem_and_the_rest_of_the_file_is_still_read():
    reading = shell('python a.py --name "oops\nsleep 1\npython b.py --ok 1\n')
    assert [i.script.text for i in reading.invocations] == ["a.py", "b.py"]
    [problem] = reading.problems
    assert problem.span == Span(1, 20, 1, 25)
    assert problem.message.startswith('unterminated ": bash stops with a syntax error here')


def test_unterminated_heredoc_takes_the_rest_of_the_file_as_bash_does():
    reading = shell("cat <<EOF\ntext\npython never_runs.py\n")
    assert reading.invocations == ()
    [problem] = reading.problems
    assert "here-document <<EOF is never closed" in problem.message and problem.span == Span(2, 1, 2, 1)


def test_binary_garbage_is_a_problem_not_an_exception():
    rng = random.Random(7)
    blob = bytes(rng.randrange(256) for _ in range(4096)).decode("latin-1")
    reading = read_shell(blob, Path("blob.sh"))
    assert reading.invocations == ()
    assert [p.message for p in reading.problems] == ["the file contains NUL bytes: it is not a shell script"]
    noisy = read_shell(blob.replace("\x00", ""), Path("blob.sh"))
    assert noisy.invocations == () and 1 <= len(noisy.problems) <= 51
    for _ in range(300):  # never a traceback, whatever the bytes
        text = "".join(rng.choice("ab \"'$`(){}[]\\;&|<>\n#=-*x!:+%@0~") for _ in range(120))
        read_shell(text, Path("fuzz.sh"))
        read_markdown("```\n" + text + "\n```\n", Path("fuzz.md"))


def test_circular_source_is_a_problem_and_the_variables_read_so_far_are_kept():
    files = {p.name: p.read_text() for p in FIXTURES.glob("circular_*.sh")}
    reading = fixture("circular_a.sh", read=lambda p: files.get(p.name))
    [problem] = reading.problems
    assert problem.message == "circular source: circular_a.sh -> circular_b.sh -> circular_a.sh"
    assert problem.span == Span(2, 1, 2, 21)
    inv = only(reading)
    assert texts(inv.args) == ["--x", "1", "--y", "2"]
    assert origin(inv.args[1]) == (1, 3, 1, 4) and origin(inv.args[3]) is None  # Y is written in the other file


def test_a_one_megabyte_launcher_reads_in_about_a_second():
    block = "".join((FIXTURES / n).read_text() for n in ("fastchat_train_lora.sh", "qwen_finetune_lora_ds.sh",
                                                        "openrlhf_train_sft.sh"))
    text = block * (1_000_000 // len(block) + 1)
    start = time.process_time()
    reading = read_shell(text, Path("big.sh"))
    elapsed = time.process_time() - start
    assert len(reading.invocations) == 3 * (1_000_000 // len(block) + 1)
    assert elapsed < 3.0, f"{elapsed:.2f}s"  # about 1 s here; the bound leaves room for a loaded machine


# ---- variables ----------------------------------------------------------------------------------------------------
def test_an_assignment_in_a_branch_makes_the_variable_unknown_unless_every_branch_agrees():
    inv = only(shell("""\
        A=1; B=1
        if [ -n "$FAST" ]; then A=2; B=3; else A=2; fi
        C=x
        case $1 in big) C=y ;; esac
        python t.py $A $B $C
        """))
    a, b, c = inv.args
    assert a.text == "2"
    assert b.text is None and b.note.startswith("B is set in the `if` at line 2")
    assert c.text is None and c.note.startswith("C is set in the `case` at line 4")


def test_default_expansions_and_values_from_outside_the_file():
    inv = only(shell("""\
        LR=${LR:-2e-5}
        python t.py --lr $LR --seed $RANDOM --host $(hostname) --n `nproc` --batch ${BS:-8} --all "$@" --x ${X:?}
        """))
    lr = inv.args[1]
    assert (lr.text, lr.note, origin(lr)) == ("2e-5", "the default of ${LR:-...}: LR is not set in this file",
                                               (1, 10, 1, 14))
    assert [(w.text, w.note) for w in inv.args[3:12:2]] == [
        (None, "$RANDOM changes on every run"), (None, "the output of a command (`$(...)`)"),
        (None, "the output of a command (backquotes)"),
        ("8", "the default of ${BS:-...}: BS is not set in this file"),
        (None, "$@ is the caller's arguments (any number of words)")]
    assert inv.args[-1].text is None


def test_a_shell_option_parser_keeps_its_defaults_as_assumptions_and_leaves_the_rest_unknown():
    inv = only(shell("""\
        EPOCHS=3
        while [[ $# -gt 0 ]]; do
          case "$1" in
            --model) MODEL="$2"; shift 2 ;;
            --epochs) EPOCHS="$2"; shift 2 ;;
            *) shift ;;
          esac
        done
        python train.py --model ${MODEL:-gpt2} --epochs $EPOCHS --plain $MODEL
        """))
    model, epochs, plain = inv.args[1], inv.args[3], inv.args[5]
    assert model.text == "gpt2" and "the caller may set MODEL instead" in model.note
    assert [a.said() for a in model.assumed] == ["MODEL=gpt2, the default at run.sh:9"]
    # the run as documented passes no options: EPOCHS keeps the 3 it had before the loop, as an assumption
    assert epochs.text == "3" and [a.said() for a in epochs.assumed] == ["EPOCHS=3, the default at run.sh:1"]
    # MODEL had no value before the loop: only an option could give it one
    assert plain.text is None and plain.note.endswith("$2 is set by the caller") and plain.assumed == ()


def test_an_empty_default_before_an_option_parser_is_a_required_option_not_a_value():
    # open-r1's slurm/train.slurm shape: MODEL="" then the parser, then `-z "$MODEL"` exits; the documented run
    # passes --model, so the path the command builds is unknown (no "recipes//config_.yaml" to report missing)
    inv = only(shell("""\
        MODEL=""
        TASK=sft
        while [[ $# -gt 0 ]]; do
          case "$1" in
            --model) MODEL="$2"; shift 2 ;;
            --task) TASK="$2"; shift 2 ;;
          esac
        done
        python src/$TASK.py --config recipes/$MODEL/config.yaml
        """))
    assert inv.script.text == "src/sft.py"  # TASK keeps its default, as an assumption
    assert inv.args[1].text is None  # MODEL: unknown, never ""


def said(word: Word) -> list[str]:
    return [a.said() for a in word.assumed]


def test_the_option_parser_shapes_keep_their_defaults_as_assumptions_and_branches_are_not_guessed():
    reading = shell("""\
        MODEL=org/a
        LR=${LR:-2e-5}
        for arg in "$@"; do case $arg in --model=*) MODEL="${arg#*=}" ;; esac; done
        python a.py --model=$MODEL --lr $LR
        SIZE=7b
        while true; do case "$1" in -s) SIZE=$2; shift 2 ;; *) break ;; esac; done
        python b.py --model org/$SIZE-chat
        until [ $# -eq 0 ]; do MODEL=$1; shift; done
        python c.py --model "$MODEL"
        if [ -n "$BIG" ]; then MODEL=org/big; else MODEL=org/small; fi
        CERTAIN=org/c
        python d.py --model $MODEL --other $CERTAIN
        for lr in 1e-5; do python e.py --lr $lr; done
        """)
    a, b, c, d, e = reading.invocations
    assert (a.args[0].text, said(a.args[0])) == ("--model=org/a", ["MODEL=org/a, the default at run.sh:1"])
    assert (a.args[2].text, said(a.args[2])) == ("2e-5", ["LR=2e-5, the default at run.sh:2"])
    assert (b.args[1].text, said(b.args[1])) == ("org/7b-chat", ["SIZE=7b, the default at run.sh:5"])
    assert said(c.args[1]) == ["MODEL=org/a, the default at run.sh:1"]  # (a default kept across two parsers)
    assert d.args[1].text is None and d.args[1].note.startswith("MODEL is set in the `if` at line 10")
    assert (d.args[3].text, said(d.args[3])) == ("org/c", [])
    assert said(e.args[1]) == []  # a loop over the file's own words is no option parser


def test_an_option_parser_in_a_function_called_with_the_callers_arguments_keeps_its_defaults():
    inv = only(shell("""\
        MODEL=org/model-7b
        parse_args() {
          while [ $# -gt 0 ]; do
            case "$1" in --model) MODEL=$2; shift 2 ;; *) shift ;; esac
          done
        }
        parse_args "$@"
        python train.py --model $MODEL
        """))
    assert (inv.args[1].text, said(inv.args[1])) == ("org/model-7b", ["MODEL=org/model-7b, the default at run.sh:1"])


def test_arrays_command_strings_and_eval_split_into_words():
    reading = shell("""\
        ARGS=(--model_name_or_path "meta-llama/Llama-2-7b-hf" --bf16 True)
        ARGS+=(--max_len 4096)
        python a.py "${ARGS[@]}"
        CMD="python b.py --a 1"
        $CMD --b "x y"
        eval "$CMD --c 3"
        """)
    a, b, c = reading.invocations
    assert texts(a.args) == ["--model_name_or_path", "meta-llama/Llama-2-7b-hf", "--bf16", "True", "--max_len",
                             "4096"]
    assert origin(a.args[1]) == (1, 29, 1, 53) and a.args[1].raw == '"${ARGS[@]}"'
    assert (b.script.text, b.script.raw, origin(b.script)) == ("b.py", "$CMD", (4, 13, 4, 17))
    assert texts(b.args) == ["--a", "1", "--b", "x y"]
    assert texts(c.args) == ["--a", "1", "--c", "3"] and at(c.args[2]) == (6, 12, 6, 15)


def test_environment_prefixes_exports_and_loops_over_known_words():
    reading = shell("""\
        export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
        for lr in 1e-5 2e-5; do
          CUDA_VISIBLE_DEVICES=0,1 env WANDB_MODE=offline python train.py --lr $lr
        done
        """)
    first, second = reading.invocations
    assert [(n, w.text) for n, w in first.env] == [("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
                                                   ("CUDA_VISIBLE_DEVICES", "0,1"), ("WANDB_MODE", "offline")]
    assert at(dict(first.env)["CUDA_VISIBLE_DEVICES"]) == (3, 24, 3, 27)
    assert (first.args[1].text, origin(first.args[1])) == ("1e-5", (2, 11, 2, 15))
    assert (second.args[1].text, origin(second.args[1])) == ("2e-5", (2, 16, 2, 20))


def test_sourced_variables_are_known_when_the_file_can_be_read_and_unknown_otherwise():
    files = {"env.sh": "MODEL=gpt2\nexport NCCL_DEBUG=INFO\n"}
    inv = only(shell("source ./env.sh\npython t.py $MODEL\n", read=lambda p: files.get(p.name)))
    assert inv.args[0].text == "gpt2" and inv.args[0].origin is None
    assert [(n, w.text, at(w)) for n, w in inv.env] == [("NCCL_DEBUG", "INFO", (1, 1, 1, 16))]
    blind = only(shell(". ./env.sh\npython t.py $MODEL ${BS:-4}\n"))
    assert blind.args[0].note == "MODEL is not set in this file (it may come from ./env.sh (sourced on line 1), " \
                                 "which could not be read)"
    assert blind.args[1].text == "4"


def test_functions_run_when_called_with_their_arguments():
    reading = shell("""\
        run() {
          accelerate launch --num_processes 2 sft.py --config "$1"
        }
        run recipes/a.yaml
        exit 0
        python after_exit.py
        """)
    inv = only(reading)
    assert inv.args[1].text == "recipes/a.yaml" and origin(inv.args[1]) == (4, 5, 4, 19)


# ---- launch forms -----------------------------------------------------------------------------------------------
def test_launch_forms_and_their_prefixes():
    reading = shell("""\
        python -m pkg.train --x 1
        /opt/conda/bin/python3.10 -u -W ignore train.py
        python -m torch.distributed.run --nproc_per_node=2 train.py
        python -m accelerate.commands.launch --num_processes 4 train.py
        uv run --with peft python -O train.py
        nohup srun --nodes=2 --ntasks-per-node=1 torchrun --nnodes 2 --nproc_per_node 8 train.py > log 2>&1 &
        exec time ./train.py --fast
        mpirun -np 16 -x NCCL_DEBUG --mca btl ^openib python train.py
        python -X dev -m pkg.other
        python $PYFLAGS train.py --x 1
        """)
    got = [(i.launcher, i.script.text if i.script else None, i.module, [n for n, _ in i.options], world_size(i))
           for i in reading.invocations]
    assert got == [
        ("python", None, "pkg.train", [], 1),
        ("python", "train.py", None, ["u", "W"], 1),
        ("torchrun", "train.py", None, ["nproc_per_node"], 2),
        ("accelerate launch", "train.py", None, ["num_processes"], 4),
        ("python", "train.py", None, ["O"], 1),
        ("srun torchrun", "train.py", None, ["nnodes", "nproc_per_node"], 16),
        ("python", "./train.py", None, [], 1),
        ("mpirun python", "train.py", None, [], 16),
        ("python", None, "pkg.other", ["X"], 1),
        ("python", "train.py", None, [""], 1),
    ]
    srun = reading.invocations[5]
    assert [(n, w.text) for n, w in srun.job_options] == [("nodes", "2"), ("ntasks_per_node", "1")]
    mpirun = reading.invocations[7]
    assert [(n, w.text) for n, w in mpirun.job_options] == [("np", "16"), ("x", "NCCL_DEBUG"), ("mca", "btl")]


def test_world_size_needs_literal_counts():
    def size(line: str) -> int | None:
        return world_size(only(shell(line + "\n")))

    assert size("torchrun --nproc_per_node auto train.py") is None
    assert size("torchrun --nnodes 1:4 --nproc_per_node 8 train.py") is None
    assert size("torchrun --nnodes 2:2 --nproc_per_node 8 train.py") == 16
    assert size("torchrun train.py") == 1  # torchrun's defaults
    assert size("torchrun $DIST_ARGS train.py") is None  # the unknown words may hold --nproc_per_node
    assert size("deepspeed --num_gpus 4 --num_nodes 2 train.py") == 8
    assert size("deepspeed --hostfile hosts --num_gpus 8 train.py") is None
    assert size("deepspeed --include 'worker-0:0,1@worker-1:0,1,2' train.py") == 5
    assert size("deepspeed --include worker-0 train.py") is None
    assert size("CUDA_VISIBLE_DEVICES=0,1,2 deepspeed train.py") == 3
    assert size("accelerate launch --multi_gpu train.py") is None  # its config file decides
    assert size("accelerate launch --num-processes=8 train.py") == 8
    assert size("srun -n 8 python train.py") == 8
    assert size("srun --nodes=$N python train.py") is None


def test_sbatch_header_counts_for_srun_python_and_sets_slurm_variables():
    inv = only(shell("""\
        #!/bin/bash
        #SBATCH -N 2
        #SBATCH --ntasks-per-node=4 --gpus-per-node=4
        srun python train.py --nodes $SLURM_NNODES --gpus $SLURM_GPUS_PER_NODE
        """, "job.sbatch"))
    assert [(n, w.text) for n, w in inv.job_options] == [("nodes", "2"), ("ntasks_per_node", "4"),
                                                         ("gpus_per_node", "4")]
    assert world_size(inv) == 8
    assert texts(inv.args) == ["--nodes", "2", "--gpus", "4"] and origin(inv.args[1]) == (2, 12, 2, 13)
    late = only(shell("echo start\n#SBATCH --nodes=4\nsrun python t.py\n"))
    assert late.job_options == ()  # sbatch stops reading directives at the first command


def test_looks_like_launcher_by_suffix_or_shebang():
    assert looks_like_launcher(Path("scripts/train.sh"), b"")
    assert looks_like_launcher(Path("run.SLURM"), b"")
    assert looks_like_launcher(Path("job.sbatch"), b"") and looks_like_launcher(Path("x.bash"), b"")
    assert looks_like_launcher(Path("train"), b"#!/bin/bash\nset -e\n")
    assert looks_like_launcher(Path("train"), b"#!/usr/bin/env bash\n")
    assert looks_like_launcher(Path("train"), b"#! /bin/sh\n") and looks_like_launcher(Path("t"), b"#!/bin/zsh")
    assert looks_like_launcher(Path("t"), b"#!/usr/bin/env -S bash -e\n")
    assert not looks_like_launcher(Path("train.py"), b"#!/usr/bin/env python3\n")
    assert not looks_like_launcher(Path("README.md"), b"# Title\n")


def test_the_lexer_loads_only_when_a_launcher_is_read():
    probe = ("import sys\nimport trainlint.launch.shell\n"
             "print(sorted(m for m in sys.modules if m.startswith('trainlint.launch.')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "['trainlint.launch.model', 'trainlint.launch.shell']", out.stderr


def test_deep_nesting_and_many_unclosed_constructs_stay_local_and_fast():
    reading = shell("echo " + "$(" * 500 + "\npython after.py\n" + "if true; then\n" * 200 + "fi\n" * 200
                    + "python last.py\n")
    assert [i.script.text for i in reading.invocations] == ["after.py", "last.py"]
    assert reading.problems[0].message.startswith("unterminated `$(` (command substitution)")
    assert any(p.message.startswith("commands nest too deeply here") for p in reading.problems)
    broken = "echo ${x:-a\n" * 20000 + "python t.py\n"
    start = time.process_time()
    reading = read_shell(broken, Path("broken.sh"))
    assert time.process_time() - start < 3.0
    assert len(reading.problems) == 51 and reading.problems[-1].message == "19950 more problems not shown"


def test_parameter_expansions_bash_evaluates_statically():
    inv = only(shell("""\
        P=path/to/model.tar.gz; L="a b  c"; N=3
        python t.py ${P#*/} ${P##*/} ${P%.*} ${P%%.*} ${P^^} ${P:5:2} ${#P} ${L// /_} ${P/#path/x} $((N * 2 + 1))
        """))
    assert texts(inv.args) == ["to/model.tar.gz", "model.tar.gz", "path/to/model.tar", "path/to/model",
                               "PATH/TO/MODEL.TAR.GZ", "to", "20", "a_b__c", "x/to/model.tar.gz", "7"]
    assert origin(inv.args[0]) == (1, 8, 1, 23)  # a removed prefix still points into the value


def test_case_on_a_known_value_runs_only_the_matching_arm():
    reading = shell("""\
        MODE=lora
        case "$MODE" in
          full) python full.py ;;
          lora|qlora) python lora.py ;;
          *) python other.py ;;
        esac
        """)
    assert [i.script.text for i in reading.invocations] == ["lora.py"]


def test_readme_placeholders_are_unknown_values_not_redirections():
    md = "```bash\ntorchrun --nproc_per_node {num_gpus} train.py --model_name_or_path <your_model> --bf16 True\n```\n"
    inv = only(read_markdown(md, Path("README.md")))
    gpus = inv.option("nproc_per_node")
    assert (gpus.text, gpus.raw, gpus.note) == (None, "{num_gpus}", "a placeholder for the reader to fill in")
    assert texts(inv.args) == ["--model_name_or_path", None, "--bf16", "True"]
    assert inv.args[1].raw == "<your_model>" and at(inv.args[1]) == (2, 68, 2, 80)
    assert world_size(inv) is None


def test_options_that_change_directory_set_the_working_directory():
    reading = shell("cd a\nsrun --chdir=b python t.py\nuv run --directory /x python t.py\nenv -C c python t.py\n")
    assert [i.cwd for i in reading.invocations] == ["a/b", "/x", "a/c"]


def test_a_failing_read_callback_counts_as_unreadable():
    def fail(path: Path) -> str | None:
        raise OSError(f"cannot read {path}")

    inv = only(shell("source x.sh\npython t.py $A\n", read=fail))
    assert inv.args[0].note == "A is not set in this file (it may come from x.sh (sourced on line 1), which could " \
                               "not be read)"


def test_ifs_and_read_split_as_bash_does():
    reading = shell("""\
        LIST="0,1,,3"
        IFS=, read -ra GPUS <<< "$LIST"
        read -r A B <<< "x y z"
        python t.py "${GPUS[@]}" "$A" "$B" ${#GPUS[@]}
        IFS=,
        python t.py $LIST a$LIST
        """)
    first, second = reading.invocations
    assert texts(first.args) == ["0", "1", "", "3", "x", "y z", "4"]
    assert origin(first.args[0]) == (1, 7, 1, 8) and origin(first.args[5]) == (3, 20, 3, 23)
    assert texts(second.args) == ["0", "1", "", "3", "a0", "1", "", "3"]


def test_sbatch_wrap_runs_its_string_as_a_job():
    reading = shell('sbatch --nodes=2 --wrap "srun --ntasks-per-node=4 python w.py"\nsbatch --wrap="python w2.py"\n')
    srun, plain = reading.invocations
    assert (srun.launcher, srun.script.text, at(srun.script)) == ("sbatch srun python", "w.py", (1, 58, 1, 62))
    assert [(n, w.text) for n, w in srun.job_options] == [("ntasks_per_node", "4"), ("nodes", "2")]
    assert world_size(srun) == 8
    assert (plain.launcher, world_size(plain)) == ("sbatch python", 1)


def test_crlf_line_endings_are_read_as_bash_reads_them():
    reading = shell("python train.py --x 1\r\npython other.py\r\n")
    # bash keeps each \r in the line's last word: `1\r`, and a script named `other.py\r`, which is no .py file
    [inv] = reading.invocations
    assert inv.script.text == "train.py" and texts(inv.args) == ["--x", "1\r"]
    [problem] = reading.problems
    assert problem.span == Span(1, 22, 1, 23) and problem.message.startswith("Windows (CRLF) line endings")


def test_tilde_fences_and_fences_indented_in_a_list():
    md = ("1. Train:\n\n   ~~~sh\n   $ deepspeed --num_gpus 2 train.py \\\n       --bf16 True\n   ~~~\n\n"
          "2. Evaluate:\n   ````\n   python eval.py\n   ````\n")
    ds, ev = read_markdown(md, Path("docs/usage.md")).invocations
    assert ds.span == Span(4, 6, 5, 19) and texts(ds.args) == ["--bf16", "True"] and world_size(ds) == 2
    assert ev.script.text == "eval.py" and at(ev.script) == (10, 11, 10, 18)


def test_a_missing_backslash_leaves_the_next_options_orphaned():
    reading = shell("python train.py --lr 1e-4\n    --bf16 True \\\n    --gradient_checkpointing\n")
    inv = only(reading)
    assert texts(inv.args) == ["--lr", "1e-4"]
    [problem] = reading.problems
    assert problem.span == Span(2, 5, 3, 29)
    assert problem.message.startswith("`--bf16` starts a command of its own")
    assert only(fixture("broken_continuation.sh")) and len(fixture("broken_continuation.sh").problems) == 1


def test_files_the_launcher_downloads_tests_for_or_writes_are_made_before_later_commands():
    reading = shell("cd work\n"
                    "wget -P data/raw https://example.org/a/part1.json\n"
                    "curl -sL -o cfg/ds.json https://example.org/ds.json\n"
                    "huggingface-cli download org/recipes --local-dir recipes\n"
                    "git clone https://github.com/org/evaltool.git\n"
                    "if [ ! -f out/stats.json ]; then python stats.py --save_path out/stats.json; fi\n"
                    "python prep.py --out-file data/prepared.json\n"
                    "python train.py\n")
    stats, prep, train = reading.invocations
    assert stats.made == ("work/data/raw/part1.json", "work/cfg/ds.json", "work/recipes/", "work/evaltool/",
                          "work/out/stats.json")
    assert train.made == stats.made + ("work/data/prepared.json",)  # an earlier command's output
    assert prep.made == stats.made
    assert shell("wget $URL\npython t.py\n").invocations[0].made == ()  # an unknown URL names nothing


def test_a_redirect_from_a_process_substitution_is_read():
    # `mapfile -t A < <(cmd)` (bash completion scripts, loops over a command's output): the target of `<` is the
    # process substitution `<(cmd)`, a word; `<` with nothing after it is still reported
    text = 'mapfile -t A < <(compgen -W "a b" -- "$cur")\nwhile read -r f; do echo "$f"; done < <(ls)\n' \
           "python train.py --lr 1e-4\n"
    reading = read_shell(text, Path("run.sh"))
    assert reading.problems == ()
    assert [inv.script.text for inv in reading.invocations] == ["train.py"]
    bad = read_shell("cat <\npython train.py\n", Path("run.sh"))
    assert [p.message for p in bad.problems] == ["`<` has no target"]


def test_a_case_statement_inside_a_command_substitution():
    # `$(case ... esac)`: the patterns' `)` do not close the substitution (bash -n accepts this; it used to give
    # three false problems), and what the substitution prints stays unknown
    text = ('MODEL=$(case "$1" in\n  small) echo org/m-1b ;;\n  *) echo org/m-8b ;;\nesac)\n'
            'python train.py --model_name_or_path "$MODEL" --y "$(case $z in a) echo 1;; esac)" --lr 1e-4\n')
    reading = read_shell(text, Path("run.sh"))
    assert reading.problems == ()
    (inv,) = reading.invocations
    assert [a.text for a in inv.args] == ["--model_name_or_path", None, "--y", None, "--lr", "1e-4"]


def test_an_indented_code_block_is_a_documented_launch():
    # CommonMark: 4 spaces after a blank line is a code block; the launch reads in the README's own coordinates
    md = ("# Train\n\nFine-tune with:\n\n    export MODEL=meta-llama/Llama-2-7b-hf\n"
          "    torchrun --nproc_per_node 4 train.py \\\n        --model_name_or_path $MODEL \\\n"
          "        --bf16 True\n\n    model = AutoModel.from_pretrained(x)\n\nThen:\n")
    [inv] = read_markdown(md, Path("README.md")).invocations
    assert inv.launcher == "torchrun" and inv.script.text == "train.py" and inv.span.line == 6
    assert at(inv.script) == (6, 33, 6, 41) and world_size(inv) == 4
    assert texts(inv.args) == ["--model_name_or_path", "meta-llama/Llama-2-7b-hf", "--bf16", "True"]


def test_indented_text_that_is_not_a_code_block_is_not_read():
    # a list item's indented content, a paragraph's indented continuation
    md = "- Step one:\n\n    python list_item.py\n\nSome text\n    python continuation.py\n"
    assert read_markdown(md, Path("README.md")).invocations == ()
    # an indented line inside a fence is the fence's, read once
    fenced = "Run:\n\n```sh\n\n    python fenced.py --x\n```\n"
    [inv] = read_markdown(fenced, Path("README.md")).invocations
    assert inv.script.text == "fenced.py"
