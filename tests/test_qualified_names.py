"""Calls are matched through the file's imports (TorchFix's qualified names, facts/model.py Call.qualified /
is_api / library): aliases and module attributes are the library's API, a name the file binds itself or imports
from another module is not, and a name whose import cannot be seen (a star import, a relative import of the
repository's own module, no import at all) is matched by its short name as before."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from conftest import codes

from trainlint.facts.extract import extract_facts
from trainlint.facts.names import DATALOADER, PEFT_WRAP, TORCH_CHECKPOINT


def _calls(source: str, short: str):
    text = textwrap.dedent(source)
    facts = extract_facts(cst.parse_module(text), "train.py", text)
    found = [c for c in facts.calls if c.short == short]
    assert found, f"no {short}() call recorded"
    return found


def _call(source: str, short: str):
    (call,) = _calls(source, short)
    return call


def test_an_aliased_import_is_the_library_class():
    call = _call("from transformers import TrainingArguments as TA\nargs = TA(output_dir='o')\n", "TrainingArguments")
    assert call.qualified == "transformers.TrainingArguments" and call.library == "transformers"
    assert call.is_api("transformers.TrainingArguments") and not call.is_api("trl.TrainingArguments")


@pytest.mark.parametrize("source,qualified", [
    ("import trl\ncfg = trl.SFTConfig(output_dir='o')\n", "trl.SFTConfig"),
    ("import torch.utils.data as tud\nloader = tud.DataLoader(ds, batch_size=4)\n", "torch.utils.data.DataLoader"),
    ("import torch\nloader = torch.utils.data.DataLoader(ds, batch_size=4)\n", "torch.utils.data.DataLoader"),
    ("from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=4)\n", "torch.utils.data.DataLoader"),
    ("from torch.utils.data.dataloader import DataLoader\nloader = DataLoader(ds)\n",
     "torch.utils.data.dataloader.DataLoader"),
])
def test_module_attributes_and_from_imports_resolve_to_the_dotted_name(source, qualified):
    (call,) = [c for c in _calls(source, qualified.rsplit(".", 1)[1])]
    assert call.qualified == qualified and not call.local
    if qualified.endswith("DataLoader"):  # torch re-exports it: the path between library and name is not compared
        assert call.is_api(*DATALOADER) and call.library == "torch"


def test_a_function_of_the_same_short_name_from_another_module_is_not_the_api():
    call = _call("from mylib import get_peft_model\nmodel = get_peft_model(model, cfg)\n", "get_peft_model")
    assert call.qualified == "mylib.get_peft_model" and call.library == "mylib"
    assert not call.is_api(*PEFT_WRAP) and not call.in_library("peft")


def test_the_repository_s_own_function_of_the_same_name_is_not_the_api():
    call = _call('''
        def get_peft_model(model, cfg):
            return model

        model = get_peft_model(model, cfg)
    ''', "get_peft_model")
    assert call.qualified is None and call.local and not call.is_api(*PEFT_WRAP)


def test_a_parameter_shadows_the_import_inside_its_function():
    outside, inside = _calls('''
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=4)

        def build(DataLoader, ds):
            return DataLoader(ds, batch_size=8)
    ''', "DataLoader")
    assert outside.is_api(*DATALOADER)
    assert inside.local and inside.qualified is None and not inside.is_api(*DATALOADER)


@pytest.mark.parametrize("source", [
    "from peft import *\nmodel = get_peft_model(model, cfg)\n",  # a star import: the name's origin is not seen
    "from .utils import get_peft_model\nmodel = get_peft_model(model, cfg)\n",  # the repository's own re-export
    "model = get_peft_model(model, cfg)\n",  # a snippet without its imports
])
def test_a_call_whose_import_cannot_be_seen_is_matched_by_its_short_name(source):
    call = _call(source, "get_peft_model")
    assert call.qualified is None and not call.local and call.library is None
    assert call.is_api(*PEFT_WRAP)


def test_a_method_of_a_local_object_is_not_taken_for_the_file_s_own_function():
    call = _call('''
        class Block:
            def forward(self, x):
                return self.checkpoint(self.inner, x)
    ''', "checkpoint")
    assert call.qualified is None and not call.local
    assert call.is_api(*TORCH_CHECKPOINT) and call.library != "torch"  # TL201 also asks for torch's own


def test_torch_checkpoint_through_a_module_alias():
    call = _call("import torch.utils.checkpoint as cp\ny = cp.checkpoint(block, x)\n", "checkpoint")
    assert call.qualified == "torch.utils.checkpoint.checkpoint" and call.is_api(*TORCH_CHECKPOINT)


LORA_GC = '''
# pip install transformers==4.57.6 peft==0.17.1
from PEFT_MODULE import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
model = get_peft_model(model, LoraConfig(r=16, target_modules=["q_proj", "v_proj"]))
model.gradient_checkpointing_enable()
'''


@pytest.mark.parametrize("module,fires", [("peft", True), ("mylib.adapters", False)])
def test_tl201_needs_peft_s_get_peft_model_not_a_namesake(lint, module, fires):
    assert ("TL201" in codes(lint(LORA_GC.replace("PEFT_MODULE", module)))) is fires


LOOP = '''
from LOADER_MODULE import DataLoader
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
loader = DataLoader(ds, batch_size=8)
'''


@pytest.mark.parametrize("module,batch", [("torch.utils.data", [8]), ("mylib.loading", [])])
def test_the_loop_batch_comes_from_torch_s_dataloader_only(module, batch):
    text = LOOP.replace("LOADER_MODULE", module)
    facts = extract_facts(cst.parse_module(text), "train.py", text)
    assert [e.value.value for e in facts.batch_evidence if e.source.startswith("DataLoader")] == batch


def test_calls_to_finds_peft_s_lora_config_through_an_alias_and_not_a_namesake():
    text = textwrap.dedent('''
        import peft
        from mylib import LoraConfig

        a = peft.LoraConfig(r=8)
        b = LoraConfig(r=16)
    ''')
    facts = extract_facts(cst.parse_module(text), "train.py", text)
    assert [c.kw("r").value for c in facts.calls_to("peft.LoraConfig")] == [8]
    assert [c.kw("r").value for c in facts.calls_named("LoraConfig")] == [8, 16]
