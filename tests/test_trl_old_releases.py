"""TRL releases before 0.12 (read from 0.7.0 on, knowledge/arguments.json): a script pinned to trl 0.8.6 in the
shape of that release's examples/scripts/dpo.py gets ModelConfig's defaults of 0.8.6.

trl 0.8.6 trl/trainer/model_config.py:21 `torch_dtype: Optional[str] = field(default=None, metadata={...,
"choices": ["auto", "bfloat16", "float16", "float32"]})`; ModelConfig first appears in 0.7.11 (0.7.10 has no
model_config.py). transformers 4.40.2 modeling_utils.py:2970 `torch_dtype = kwargs.pop("torch_dtype", None)`, :3490
`if torch_dtype is not None:` - None loads in torch's default dtype, fp32.
"""

from __future__ import annotations

from conftest import codes
from trainlint.knowledge.versions import LibraryVersion, Versions
from trainlint.resolve import library_field_default

DPO_086 = '''
from dataclasses import dataclass, field

from transformers import AutoModelForCausalLM, AutoTokenizer, HfArgumentParser, TrainingArguments
from trl import DPOTrainer, ModelConfig


@dataclass
class ScriptArguments:
    dataset_name: str = field(default="trl-lib/ultrafeedback_binarized")
    beta: float = field(default=0.1)


if __name__ == "__main__":
    parser = HfArgumentParser((ScriptArguments, TrainingArguments, ModelConfig))
    args, training_args, model_config = parser.parse_args_into_dataclasses()
    model_kwargs = dict(
        revision=model_config.model_revision,
        trust_remote_code=model_config.trust_remote_code,
        attn_implementation=model_config.attn_implementation,
        torch_dtype=model_config.torch_dtype,
        use_cache=False if training_args.gradient_checkpointing else True,
    )
    model = AutoModelForCausalLM.from_pretrained(model_config.model_name_or_path, **model_kwargs)
    model_ref = AutoModelForCausalLM.from_pretrained(model_config.model_name_or_path, **model_kwargs)
    tokenizer = AutoTokenizer.from_pretrained(model_config.model_name_or_path)
    trainer = DPOTrainer(model, model_ref, args=training_args, beta=args.beta, tokenizer=tokenizer)
    trainer.train()
'''
LAUNCH = ("accelerate launch train.py --model_name_or_path Qwen/Qwen2.5-0.5B --per_device_train_batch_size 4 "
          "--bf16 True --output_dir out\n")


def files(trl: str) -> dict[str, str]:
    return {"requirements.txt": f"trl=={trl}\ntransformers==4.40.2\n", "run.sh": LAUNCH}


def tl501(found):
    return [(line, message) for code, line, message in found if code == "TL501"]


def test_model_config_torch_dtype_default_of_trl_0_8_6_is_none():
    versions = Versions(LibraryVersion("transformers", "4.40.2", "test"), LibraryVersion("trl", "0.8.6", "test"),
                        LibraryVersion("peft", "0.10.0", "test"))
    value = library_field_default("ModelConfig", "torch_dtype", versions)
    assert value.known and value.value is None
    assert value.via == "ModelConfig default (trl 0.8.6 trl/trainer/model_config.py:21)"


def test_dpo_script_pinned_to_trl_0_8_6_resolves_torch_dtype_to_none(lint):
    """model_config.torch_dtype, through `model_kwargs = dict(...)` and `**model_kwargs`, is ModelConfig's 0.8.6
    default None: the reference model (DPOTrainer's second positional argument) loads in fp32 under the launch's
    --bf16 True. Before trl 0.7.0-0.11.4 were read, that dtype was unknown and TL501 said nothing."""
    found = lint(DPO_086, files=files("0.8.6"))
    [(line, message)] = tl501(found)
    assert line == 25  # model_ref, not the policy model (it trains)
    assert message.startswith("the reference model is loaded in fp32 (dtype None: the ModelConfig default "
                              "(trl 0.8.6 trl/trainer/model_config.py:21), and transformers 4.40.2 loads in fp32 "
                              "when it is None) while the run computes in bf16")
    # Qwen2.5-0.5B: 494,032,768 parameters x 2 bytes
    assert "~942 MiB saved" in message and message.endswith("load it with torch_dtype=torch.bfloat16 (launched by run.sh:1)")


def test_a_release_without_model_config_gets_no_guess(lint):
    # trl 0.7.10 has no trl/trainer/model_config.py: no default is taken from another release
    assert tl501(lint(DPO_086, files=files("0.7.10"))) == []


def test_a_dtype_the_launch_gives_wins(lint):
    launch = LAUNCH.replace("--bf16 True", "--bf16 True --torch_dtype bfloat16")
    found = lint(DPO_086, files={**files("0.8.6"), "run.sh": launch})
    assert tl501(found) == [] and "TL301" in codes(found)


def test_an_explicit_none_is_no_dtype(lint):
    src = DPO_086.replace("torch_dtype=model_config.torch_dtype", "torch_dtype=None")
    [(line, message)] = tl501(lint(src, files=files("0.8.6")))
    assert line == 25 and "(dtype=None, and transformers 4.40.2 loads in fp32 when it is None)" in message
