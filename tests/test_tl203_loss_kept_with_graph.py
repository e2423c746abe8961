"""TL203: a loss tensor accumulated in a loop whose graph nothing frees (facts/loops.py), confirmed on CPU with
verify's live-bytes tracker: memory grows per step in exactly the loops TL203 flags."""

import subprocess
import sys
import textwrap

import pytest

from conftest import codes

HEAD = '''
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("gpt2")
'''
EVAL_LOOP = HEAD + '''

def evaluate(loader):
    model.eval()
    total = 0.0
    for batch in loader:
        outputs = model(**batch, labels=batch["input_ids"])
        total += outputs.loss
    return total / len(loader)
'''


def test_eval_loop_without_no_grad_is_flagged_with_a_safe_detach_fix(tmp_path, lint):
    found = lint(EVAL_LOOP)
    assert [(c, line) for c, line, _ in found] == [("TL203", 13)]
    assert found[0][2].startswith("`total` accumulates the loss tensor `outputs.loss`: this loop runs no backward and "
                                  "is not under torch.no_grad()")
    assert "outputs.loss.detach()" in found[0][2]


def test_fix_rewrites_only_the_accumulated_expression(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(EVAL_LOOP)
    done = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--fix", str(script)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert script.read_text() == EVAL_LOOP.replace("total += outputs.loss", "total += outputs.loss.detach()")


@pytest.mark.parametrize("loop,shape", [
    ('''
def train(loader, opt):
    losses = []
    for batch in loader:
        loss = model(**batch, labels=batch["input_ids"]).loss
        loss.backward(retain_graph=True)
        opt.step()
        losses.append(loss)
''', "backward(retain_graph=True)"),
    ('''
def train(loader, opt):
    acc = 0
    for step, batch in enumerate(loader):
        loss = model(**batch, labels=batch["input_ids"]).loss
        acc = acc + loss
        if step % 4 == 3:
            acc.backward()
            opt.step()
            acc = 0
''', "acc.backward() runs on the sum"),
    ('''
def evaluate(loader):
    losses = []
    for batch in loader:
        losses.append(model(**batch, labels=batch["input_ids"]).loss * 2)
    return torch.stack(losses).mean()
''', "this loop runs no backward"),

    # a loop over steps without `loader` in sight: it runs the model (a plain PyTorch eval with a criterion)
    ('''
def validate(criterion, num_steps, it):
    running = 0.0
    for step in range(num_steps):
        x, y = next(it)
        running += criterion(model(x), y)
    return running / num_steps
''', "this loop runs no backward"),
    ('''
def validate(criterion, val_loader):
    running = 0.0
    for x, y in val_loader:
        running += criterion(x.float(), y)
    return running
''', "this loop runs no backward"),
    # reset in an outer loop or only under an `if`: the inner iterations still carry the sum
    ('''
def evaluate(loaders):
    for loader in loaders:
        total = 0
        for batch in loader:
            total += model(**batch, labels=batch["input_ids"]).loss
''', "this loop runs no backward"),
    ('''
def train(loader, opt, n):
    for step, batch in enumerate(loader):
        if step % n == 0:
            acc = 0
        acc = acc + model(**batch, labels=batch["input_ids"]).loss
        if step % n == n - 1:
            acc.backward()
            opt.step()
''', "acc.backward() runs on the sum"),
])
def test_graph_keeping_shapes_are_flagged(lint, loop, shape):
    found = lint(HEAD + loop)
    assert codes(found) == ["TL203"]
    assert shape in found[0][2]


@pytest.mark.parametrize("loop", [
    # backward each step frees the graph's saved tensors: 4 bytes a step (measured below)
    '''
def train(loader, opt):
    total = 0
    for batch in loader:
        loss = model(**batch, labels=batch["input_ids"]).loss
        loss.backward()
        opt.step()
        total += loss
''',
    # accelerate's backward, GradScaler's scaled backward
    '''
def train(loader, opt, accelerator, scaler):
    total = 0
    for batch in loader:
        loss = model(**batch, labels=batch["input_ids"]).loss
        accelerator.backward(loss)
        total += loss
    for batch in loader:
        loss = model(**batch, labels=batch["input_ids"]).loss
        scaler.scale(loss).backward()
        total += loss
''',
    # under no_grad: no graph is recorded
    '''
def evaluate(loader):
    total = 0
    with torch.no_grad():
        for batch in loader:
            total += model(**batch, labels=batch["input_ids"]).loss
''',
    '''
@torch.no_grad()
def evaluate(loader):
    total = 0
    for batch in loader:
        total += model(**batch, labels=batch["input_ids"]).loss
''',
    '''
def evaluate(loader):
    total = 0
    for batch in loader:
        with torch.inference_mode():
            outputs = model(**batch, labels=batch["input_ids"])
        total += outputs.loss
''',
    # called only under no_grad
    '''
def evaluate(loader):
    total = 0
    for batch in loader:
        total += model(**batch, labels=batch["input_ids"]).loss
    return total

with torch.no_grad():
    evaluate([])
''',
    # the value accumulated is a Python number
    '''
def evaluate(loader):
    total = 0
    for batch in loader:
        total += model(**batch, labels=batch["input_ids"]).loss.item()
        total += float(model(**batch, labels=batch["input_ids"]).loss)
''',
    # a backward on another tensor may free this graph too: not claimed
    '''
def train(loader):
    total = 0
    for batch in loader:
        out = model(**batch, labels=batch["input_ids"])
        aux = out.loss * 0.1
        (out.loss + aux).backward()
        total += aux
''',
    # one step's loss built per sample inside a loss function (trl 1.16's GOLD trainer, ULD loss): the loop runs no
    # model and iterates no batches; the list is stacked into the loss the step backpropagates
    '''
class Distiller:
    def uld_loss(self, student_logits, teacher_logits, batch_size):
        student_probs = torch.softmax(student_logits, -1)
        teacher_probs = torch.softmax(teacher_logits, -1)
        losses = []
        for i in range(batch_size):
            student_sorted = student_probs[i].sort(dim=-1, descending=True).values
            teacher_sorted = teacher_probs[i].sort(dim=-1, descending=True).values
            aligned_loss = torch.nn.functional.l1_loss(student_sorted, teacher_sorted, reduction="sum")
            losses.append(aligned_loss)
        return torch.stack(losses).mean()
''',
    '''
def chunked_loss(hidden, labels, head):
    total = 0
    for h, y in zip(hidden.split(1024), labels.split(1024)):
        total += torch.nn.functional.cross_entropy(head(h).float(), y)
    return total
''',
    # several forwards kept on purpose, then one backward each (gradient sync tests): the list is read back per item
    '''
def forwards_then_backwards(loader, accelerator, n):
    losses = []
    for step in range(n):
        batch = next(iter(loader))
        losses.append(model(**batch, labels=batch["input_ids"]).loss)
    for step in range(n):
        accelerator.backward(losses[step])
''',
    # one step's loss built from two parts, then one backward (diffusion training with a prior-preservation loss):
    # the target is rebound earlier in the same iteration, so nothing is carried to the next one
    '''
def train(loader, opt, accelerator, prior_weight):
    for batch in loader:
        pred, pred_prior = model(**batch).logits.chunk(2)
        loss = torch.nn.functional.mse_loss(pred.float(), batch["target"].float())
        prior = torch.nn.functional.mse_loss(pred_prior.float(), batch["prior"].float())
        loss = loss + prior_weight * prior
        accelerator.backward(loss)
        opt.step()
''',
    '''
def train(epochs, loader, opt, accelerator, with_prior, prior_weight):
    for epoch in range(epochs):
        for step, batch in enumerate(loader):
            with accelerator.accumulate(model):
                pred = model(**batch).logits
                if with_prior:
                    pred, pred_prior = pred.chunk(2)
                    loss = torch.nn.functional.mse_loss(pred.float(), batch["target"].float())
                    loss = loss + prior_weight * torch.nn.functional.mse_loss(pred_prior, batch["prior"])
                else:
                    loss = torch.nn.functional.mse_loss(pred.float(), batch["target"].float())
                accelerator.backward(loss)
                opt.step()
''',
    '''
def train(loader, opt, extra):
    for step in range(3):
        out = model(**next(iter(loader)))
        loss = out.logits.sum()
        if extra:
            loss += model.aux_loss()
        loss.backward()
        opt.step()
''',
])
def test_loops_that_do_not_keep_the_graph_are_quiet(lint, loop):
    assert lint(HEAD + loop) == []


MEASURE = r'''
import json, sys
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from trainlint.verify.harness.memory_cpu import make_cpu_tracker as _make_cpu_tracker

torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=128)
model = LlamaForCausalLM(cfg)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
ids = torch.randint(0, 1000, (2, 128))
out = {}
for mode in ("eval", "eval_detach", "backward_each_step", "retain", "deferred"):
    tracker = _make_cpu_tracker(torch)
    levels = []
    with tracker:
        total, losses = 0, []
        for step in range(4):
            loss = model(input_ids=ids, labels=ids).loss
            if mode == "eval":
                total += loss
            elif mode == "eval_detach":
                total += loss.detach()
            elif mode == "backward_each_step":
                loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
                total += loss
            elif mode == "retain":
                loss.backward(retain_graph=True); opt.zero_grad(set_to_none=True)
                losses.append(loss)
            else:
                total = total + loss
            del loss
            levels.append(tracker.current)
    out[mode] = [b - a for a, b in zip(levels, levels[1:])]
json.dump(out, sys.stdout)
'''


def test_memory_grows_per_step_only_where_tl203_fires(tmp_path):
    """verify's live-bytes tracker on a tiny Llama (h64, 2 layers, vocabulary 1,000, batch 2 x 128): the graph
    kept per step matches memory.estimate.graph_bytes; a backward each step leaves 4 bytes a step."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import json

    from trainlint.memory.estimate import Geometry, Plan, graph_bytes

    done = subprocess.run([sys.executable, "-c", MEASURE], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    growth = json.loads(done.stdout)
    predicted = graph_bytes(Plan(Geometry(vocab=1000, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16,
                                          intermediate=128, params=0), batch=2, seq=128, dtype_bytes=4, act_bytes=4))
    for mode in ("eval", "retain", "deferred"):
        assert all(g > 3_000_000 for g in growth[mode]), (mode, growth[mode])
        assert all(abs(g - predicted) / g < 0.15 for g in growth[mode]), (mode, growth[mode], predicted)
    assert all(g <= 64 for g in growth["backward_each_step"]), growth["backward_each_step"]
    assert all(g <= 64 for g in growth["eval_detach"]), growth["eval_detach"]
