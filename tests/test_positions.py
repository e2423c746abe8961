"""Positions on demand and the read-only traversal (facts/walk.py) give exactly what LibCST's PositionProvider
and `module.visit` give: checked node by node on the fixtures, on odd layouts (CRLF, bare CR, form feeds,
tabs, non-ASCII, match, decorators, elif, one-line suites) and on real files of the installed libraries."""

from __future__ import annotations

import sysconfig
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from trainlint.diagnostics import Span
from trainlint.facts import extract
from trainlint.facts.walk import Misaligned, Positions, parse_starts, walk

REPO = Path(__file__).resolve().parent.parent
PURELIB = Path(sysconfig.get_paths()["purelib"])

ODD = {
    "crlf": "from transformers import TrainingArguments\r\nBS = 4\r\nargs = TrainingArguments(\r\n"
            "    output_dir='o',\r\n    per_device_train_batch_size=BS,\r\n)\r\n",
    "bare_cr": "from transformers import TrainingArguments\rBS = 4\rargs = TrainingArguments(output_dir='o',\r"
               "    per_device_train_batch_size=BS)\r",
    "form_feed": "from transformers import TrainingArguments\n\x0c\nBS = 4\n\x0cargs = TrainingArguments(\x0c"
                 "output_dir='o', per_device_train_batch_size=BS)\n",
    "tabs": "from transformers import TrainingArguments\nif True:\n\tBS = 4\n\tif BS:\n\t\targs = TrainingArguments("
            "output_dir='o',\n\t\t\tper_device_train_batch_size=BS)\n",
    "non_ascii": "from transformers import TrainingArguments\nnom = 'écrit ✓'; BS = 4  # → ü\n"
                 "args = TrainingArguments(output_dir='ö/日本', per_device_train_batch_size=BS, run_name=nom)\n",
    "no_trailing_newline": "from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='o')",
    "layouts": textwrap.dedent('''\
        # a header comment
        import torch; from transformers import AutoModelForCausalLM as M, Trainer, TrainingArguments

        @decorate(batch_size=2)
        @other
        def main(x=TrainingArguments(output_dir="d", max_length=12)):
            if x: y = M.from_pretrained("a/b", attn_implementation="eager"); z = 1
            elif Trainer(model=y, args=x):
                pass
            else:
                block_size = 2048
            match x:
                case {"k": v} if v:
                    seq_len = (
                        4096
                    )
                case _:
                    pass
            for b in DataLoader(ds, batch_size=8):  # trailing comment
                with torch.no_grad(), open("f") as fh:
                    ids = input_ids[:, :512]
            try:
                f"{Trainer(model=m, args=TrainingArguments(output_dir=f'{x}'))}"
            except (ValueError, TypeError):
                lr = \\
                    3e-4
            finally:
                class C:
                    max_seq_length: int = field(default=1024)
            return (
                Trainer(  model = y ,
                          args = x
                )
            )
        p = argparse.ArgumentParser(); p.add_argument("--batch-size", default=4)
        async def f():
            async with a as b:
                async for c in d:
                    await Trainer(model=c, args=TrainingArguments(output_dir="x"))
        '''),
}


def _every_span_matches(text: str, starts: list | None | bool = True) -> int:
    """Asks walk()'s positions for the span of every node while walking; compares with PositionProvider.
    Where the statements do not line up, positions come from the whole module, as extract_facts does."""
    module = cst.parse_module(text)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    positions = Positions(module, text, parse_starts(text) if starts is True else starts)
    seen: list[tuple[cst.CSTNode, Span]] = []

    class EveryNode(cst.CSTVisitor):
        pass

    def ask(self, node):
        if node in expected:  # (a few whitespace nodes are never generated, so have no position at all)
            seen.append((node, positions.span(node)))

    for name in dir(cst.CSTVisitor):
        if name.startswith("visit_") and name.count("_") == 1:
            setattr(EveryNode, name, ask)
    try:
        walk(module, EveryNode(), positions)
    except Misaligned:
        return _every_span_matches(text, None)
    for node, span in seen:
        r = expected[node]
        assert span == Span(r.start.line, r.start.column + 1, r.end.line, r.end.column + 1), (type(node), text)
    return len(seen)


UNFAITHFUL = {  # text LibCST does not reproduce: its positions drift from the text, and ours must drift alike
    "form_feed_starting_a_line": "from transformers import TrainingArguments\n\x0cargs = TrainingArguments("
                                 "output_dir='o')\nx = 1\n",
    "continuation_line_before_a_statement": "from transformers import TrainingArguments\n\\\nargs = "
                                            "TrainingArguments(output_dir='o')\nx = 1\n",
}


@pytest.mark.parametrize("name", sorted(ODD) + sorted(UNFAITHFUL))
def test_every_node_span_equals_position_provider_on_odd_layouts(name):
    assert _every_span_matches({**ODD, **UNFAITHFUL}[name]) > 20


@pytest.mark.parametrize("name", sorted(UNFAITHFUL))
def test_text_libcst_does_not_reproduce_takes_the_whole_module_pass(name):
    text = UNFAITHFUL[name]
    assert cst.parse_module(text).code != text
    module = cst.parse_module(text)
    assert Positions(module, text, parse_starts(text)).starts is None


def test_a_statement_whose_code_is_not_the_text_is_caught_by_its_own_check():
    text = UNFAITHFUL["form_feed_starting_a_line"]
    module = cst.parse_module(text)
    positions = Positions(module, "", None)  # past the cheap check for such text
    positions.text, positions.starts = text, parse_starts(text)

    class AskAssign(cst.CSTVisitor):
        def visit_Assign(self, node):
            positions.span(node)

    with pytest.raises(Misaligned):
        walk(module, AskAssign(), positions)


def _corpus(limit: int) -> list[Path]:
    """The fixtures and examples, then the installed libraries' files that reach LibCST (a stable sample)."""
    from trainlint.lint import _RELEVANT_BYTES

    files = sorted((REPO / "tests" / "fixtures").rglob("*.py")) + sorted((REPO / "examples").glob("*.py"))
    real = []
    for package in ("trl", "peft", "accelerate", "transformers"):
        real += [p for p in sorted((PURELIB / package).rglob("*.py")) if _RELEVANT_BYTES.search(p.read_bytes())]
    step = max(1, len(real) // limit)
    return files + real[::step][:limit]


class _Checking(extract._Collector):
    """The facts collector, checking each span it records against PositionProvider's."""

    expected: dict = {}
    checked: list[int] = [0]

    def _span(self, node):
        span = super()._span(node)
        r = self.expected[node]
        assert span == Span(r.start.line, r.start.column + 1, r.end.line, r.end.column + 1), type(node)
        self.checked[0] += 1
        return span


def test_recorded_spans_equal_position_provider_on_fixtures_and_real_files(monkeypatch):
    monkeypatch.setattr(extract, "_Collector", _Checking)
    files = _corpus(200)
    assert len(files) > 200 or not (PURELIB / "transformers").is_dir()
    for path in files:
        text = path.read_text(encoding="utf-8")
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError:
            continue
        _Checking.expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        extract.extract_facts(module, str(path), text)
    assert _Checking.checked[0] > 5000


def test_every_node_span_equals_position_provider_on_real_files():
    files = [p for p in _corpus(12) if "site-packages" in str(p)]
    assert sum(_every_span_matches(p.read_text(encoding="utf-8")) for p in files) > 10000 or not files


def test_wrong_statement_starts_fall_back_to_the_whole_module():
    text = ODD["layouts"]
    module = cst.parse_module(text)
    right = extract.extract_facts(module, "t.py", text)
    starts = parse_starts(text)
    shifted = [(line, col + 1) for line, col in starts]  # every column off by one: detected, not trusted
    assert extract.extract_facts(module, "t.py", text, shifted) == right
    assert extract.extract_facts(module, "t.py", text, starts[:-1]) == right  # a statement missing
    assert extract.extract_facts(module, "t.py", text, None) == right


class _Events(cst.CSTVisitor):
    def __init__(self, skip: type | None = None) -> None:
        super().__init__()
        self.events: list[tuple[str, int]] = []
        self.skip = skip


def _record(kind: str):
    def method(self, node):
        self.events.append((kind, id(node)))
        return False if kind == "visit" and type(node) is self.skip else None
    return method


for _name in dir(cst.CSTVisitor):
    if _name.startswith(("visit_", "leave_")) and _name.count("_") == 1:
        setattr(_Events, _name, _record(_name.split("_")[0]))


@pytest.mark.parametrize("skip", [None, cst.FunctionDef, cst.Call])
def test_walk_visits_the_nodes_module_visit_visits_in_the_same_order(skip):
    texts = list(ODD.values()) + [p.read_text(encoding="utf-8") for p in _corpus(12)]
    for text in texts:
        module = cst.parse_module(text)
        theirs, ours = _Events(skip), _Events(skip)
        module.visit(theirs)
        walk(module, ours)
        assert ours.events == theirs.events
