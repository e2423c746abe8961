"""tree-sitter-bash against trainlint's own shell front end, on the repository's shell inputs (issue 29 item 6).

Measures, per file: whether bash itself accepts it (`bash -n`: parse only, nothing runs), tree-sitter-bash's
ERROR and MISSING nodes, and the LaunchProblems `read_shell` reports; then the time of each front end (median
of 5 runs over all accepted inputs) and a few structure checks on what the evaluator would need from the tree.
The decision and the figures are written up in docs/SHELL.md.

    pip install tree-sitter tree-sitter-bash     # not a project dependency: only this script imports them
    PYTHONPATH=src python bench/shell_frontends.py [--show NAME] [--repeat 5]

Inputs: tests/fixtures/**/*.{sh,bash,slurm,sbatch} and every file under tests/fixtures/launch/shell that is not
Markdown; the literal shell texts the tests pass to `shell(...)` / `read_shell(...)` in tests/test_*.py; a
stress file written here (STRESS: every construct of the brief, one file, accepted by bash) and small
per-construct snippets (CASES), some of which bash refuses on purpose (an unclosed quote, a stray `fi`).
"""

from __future__ import annotations

import argparse
import ast
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

STRESS = r"""#!/bin/bash
#SBATCH --nodes=2
#SBATCH --gpus-per-node=8
set -euo pipefail
source ./env.sh
. "$(dirname "$0")/common.sh"

MODEL=${MODEL:-meta-llama/Llama-3.1-8B}
OUT=${1:-out}
LR=${2:-"2e-5"}
NAME=${MODEL##*/}; STEM=${NAME%%-*}; LOWER=${NAME,,}; SUB=${NAME:0:5}; REPL=${NAME//-/_}
ref=MODEL; echo "${!ref}" "${#MODEL}" "${@:2}"
: "${EPOCHS:=3}"

ARGS=(--model_name_or_path "$MODEL" --learning_rate "$LR" "--run_name=$STEM run")
ARGS+=(--bf16 True)
declare -A SIZES=([small]=1 [large]=8)
WORLD=$(( ${SLURM_NNODES:-1} * 8 ))
HEX=$((16#ff))
(( WORLD > 8 )) && echo big
for ((i = 0; i < 2; i++)); do echo "$i"; done
let STEPS=WORLD*2

while [[ $# -gt 0 ]]; do
    case "$1" in
        -m|--model) MODEL="$2"; shift 2 ;;
        --lr=*) LR="${1#*=}"; shift ;;
        --) shift; break ;;
        *) echo "unknown $1" >&2; exit 1 ;;
    esac
done
while getopts "g:n:h" opt; do
    case $opt in
        g) GPUS=$OPTARG ;;
        n) NODES=$OPTARG ;;
        h|\?) exit 0 ;;
    esac
done
shift $((OPTIND - 1))

if [[ -n ${GPUS:-} && $GPUS =~ ^[0-9]+$ ]] || [ "$NODES" = 1 ]; then
    echo ok
elif [[ ! -d $OUT ]]; then
    mkdir -p "$OUT"
else
    :
fi

cat <<EOF > "$OUT/ds.json"
{"train_micro_batch_size_per_gpu": ${MBS:-4}, "steps": $((STEPS + 1))}
EOF
cat <<'EOF' > "$OUT/raw.txt"
$NOT_EXPANDED
EOF
	cat <<-EOF
	tab-stripped $MODEL
	EOF
CFG=$(cat <<EOF
lr: $LR
EOF
)
SEP=$'\t'; NL=$'\n'; MSG=$"localized"
while IFS= read -r line; do echo "$line"; done < <(ls "$OUT")
diff <(echo a) <(echo b) || true
exec > >(tee "$OUT/log") 2>&1
X=$(case $STEM in Llama) echo l;; *) echo o;; esac)
echo done fi then esac `echo back \`inner\``
train() { local extra=$1; torchrun --nproc_per_node "$WORLD" train.py "${ARGS[@]}" $extra; }
function eval_step { python -m eval --model "$MODEL"; }
torchrun --nnodes "${SLURM_NNODES:-1}" --nproc_per_node 8 \
    train.py \
    "${ARGS[@]}" \
    --output_dir "$OUT" 2>&1 | tee "$OUT/train.log"
python train.py --lr 1 \ 
    --not_continued_after_backslash_space
srun --ntasks=1 bash -c "python train.py --seed ${SEED:-42}"
train "--gradient_checkpointing True"
"""

# name, text. Those marked `refused` are meant to be refused by bash; `bash -n` decides in the table.
CASES = {
    "bs_space": "torchrun train.py \\ \n    --lr 1\n",
    "param_ops": 'echo ${1:-x} ${V:-"a b"} ${V:=d} ${V#*/} ${V%%.*} ${V/a/b} ${V^^} ${!ref} ${V:1:2} ${@:2}\n',
    "ansi_c": "SEP=$'a\\tb' L=$\"loc\"\n",
    "proc_subst_redir": "while read -r l; do echo $l; done < <(ls)\n",
    "two_heredocs_one_line": "cat <<A <<B\na $X\nA\nb\nB\necho after\n",
    "heredoc_quoted": "cat <<'EOF' >c.yaml\nk: $X\nEOF\n",
    "heredoc_dash": "\tcat <<-EOF\n\tk: $X\n\tEOF\necho after\n",
    "heredoc_in_subst": "CFG=$(cat <<EOF\nlr: $LR\nEOF\n)\npython train.py --cfg \"$CFG\"\n",
    "arith_base": "echo $((16#ff)) $(( (1 + 2) * 3 ))\n",
    "case_in_subst": "x=$(case a in a) echo 1;; esac)\n",
    "case_fallthrough": "case $1 in a) x;;& b) y;& *) z;; esac\n",
    "keywords_as_args": "echo done fi then esac in\n",
    "regex_match": "[[ $a =~ ^[0-9]+(\\.[0-9]+)?$ ]] && echo y\n",
    "getopts": 'while getopts "g:h" o; do case $o in g) G=$OPTARG;; h|\\?) exit;; esac; done\n',
    "subshell_vs_arith": "echo $( (cd a; ls) )\n",
    "backquote_nested": "echo `echo \\`date\\``\n",
    "comment_in_word": "echo a#b # real comment\n",
    "escaped_space": "python train.py a \\ b\n",
    "non_ascii": "python train.py --run_name \u00e9t\u00e9 --lr ${LR:-1}\n",
    # bash refuses these (checked by `bash -n` below); a linter must say so
    "bad_unclosed_dq": 'echo "unclosed\npython train.py --lr 1\n',
    "bad_unclosed_sq": "echo 'unclosed\npython train.py --lr 1\n",
    "bad_unclosed_subst": "X=$(echo a\npython train.py --lr 1\n",
    "bad_unclosed_param": "echo ${V\npython train.py --lr 1\n",
    "bad_if_no_fi": "if true; then python train.py\n",
    "bad_stray_fi": "fi\npython train.py --lr 1\n",
    "bad_stray_done": "done\npython train.py --lr 1\n",
    "bad_empty_do": "while true; do done\n",
    "bad_case_no_esac": "case $1 in a) python train.py;;\n",
    "bad_unclosed_array": "a=(1 2\npython train.py\n",
    "bad_unclosed_arith": "(( x = 1 + \npython train.py\n",
    "bad_close_paren": "echo )\npython train.py\n",
    "bad_func_no_body": "f()\npython train.py\n",
    "bad_crlf_if": "if true; then\r\n  python train.py\r\nfi\r\n",
    # bash accepts with a warning: the heredoc eats the rest of the file
    "warn_heredoc_unclosed": "cat <<EOF\nno end\npython train.py --lr 1\n",
}


def fixture_files() -> list[Path]:
    fx = ROOT / "tests" / "fixtures"
    out = {p for p in fx.rglob("*") if p.is_file() and p.suffix in (".sh", ".bash", ".slurm", ".sbatch")}
    out |= {p for p in (fx / "launch" / "shell").rglob("*") if p.is_file() and p.suffix != ".md"}
    return sorted(out)


def embedded_texts() -> list[tuple[str, str]]:
    """Literal first arguments of `shell(...)` / `read_shell(...)` in the tests (dedented, as the tests do)."""
    out = []
    for p in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)):
                continue
            f = node.func
            name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
            if name in ("shell", "read_shell"):
                out.append((f"{p.stem}:{node.lineno}", textwrap.dedent(node.args[0].value)))
    return out


def bash_verdict(text: str) -> str:
    """`bash -n`: bash parses the text and runs nothing. 'ok', 'warn' (accepted with a warning) or 'ERR'."""
    if not shutil.which("bash"):
        return "?"
    r = subprocess.run(["bash", "-n"], input=text.encode(), capture_output=True, timeout=10)
    if r.returncode != 0:
        return "ERR"
    return "warn" if r.stderr.strip() else "ok"


def ts_counts(tree) -> tuple[int, int]:
    errors = missing = 0
    cur = tree.walk()
    while True:
        n = cur.node
        if n.is_error:
            errors += 1
        if n.is_missing:
            missing += 1
        if cur.goto_first_child():
            continue
        while not cur.goto_next_sibling():
            if not cur.goto_parent():
                return errors, missing


def ts_walk(tree) -> int:
    """Visit every node from Python reading what an evaluator reads (type, byte range): the cost of using it."""
    k = 0
    cur = tree.walk()
    while True:
        n = cur.node
        k += n.start_byte + n.end_byte + len(n.type) > -1
        if cur.goto_first_child():
            continue
        while not cur.goto_next_sibling():
            if not cur.goto_parent():
                return k


def words(node) -> list[str]:
    """The argument nodes of every command in the tree, as written (what an evaluator would start from)."""
    out = []
    if node.type == "command":
        out += [c.text.decode() for c in node.children_by_field_name("argument")]
    for c in node.children:
        out += words(c)
    return out


def structure_checks(parser) -> None:
    """What the evaluator needs from the tree, on inputs where tree-sitter and bash could part ways."""
    def tree(src: str):
        return parser.parse(src.encode()).root_node

    print()
    print("structure checks (bash's reading -> tree-sitter's tree):")
    r = tree(CASES["escaped_space"])
    print(f"  `python train.py a \\ b`: bash passes ['train.py', 'a', ' b']; tree-sitter arguments {words(r)}")
    r = tree(CASES["bs_space"])
    print(f"  backslash-space then newline: bash runs 2 commands; tree-sitter "
          f"{sum(1 for c in r.children if c.type == 'command')} commands, arguments {words(r)} (the `\\ ` word "
          f"is {'kept' if any(w.strip() == '' or w == chr(92) + ' ' for w in words(r)) else 'not in the tree'})")
    r = tree("echo ${1:-x}\n").children[0].children[1]
    print(f"  `${{1:-x}}`: {r.type} children {[c.type for c in r.children]} (operator as an anonymous node)")
    r = tree(CASES["heredoc_quoted"])
    body = next(n for n in _nodes(r) if n.type == "heredoc_body")
    start = next(n for n in _nodes(r) if n.type == "heredoc_start")
    print(f"  quoted heredoc: heredoc_start {start.text.decode()!r}, body children {[c.type for c in body.children]} "
          f"(no expansion parsed; the evaluator reads the quoting from heredoc_start)")
    r = tree(CASES["two_heredocs_one_line"])
    print(f"  `cat <<A <<B` (bash accepts): {sum(1 for n in _nodes(r) if n.is_error)} ERROR node(s); heredoc bodies "
          f"{[n.text.decode() for n in _nodes(r) if n.type == 'heredoc_body']}")
    r = tree(CASES["proc_subst_redir"])
    red = next(n for n in _nodes(r) if n.type == "file_redirect")
    print(f"  `done < <(ls)`: file_redirect destination {red.child_by_field_name('destination').type}")
    r = tree(CASES["non_ascii"])
    w = next(n for n in _nodes(r) if n.type == "expansion")
    print(f"  offsets are UTF-8 bytes: `${{LR:-1}}` at byte {w.start_byte}, str index "
          f"{CASES['non_ascii'].index('${LR')} (spans need a byte->character map)")
    r = tree("python train.py --lr 1\n")
    print(f"  `--lr 1`: argument node types {[c.type for c in r.children[0].children_by_field_name('argument')]}")
    r = tree(CASES["bad_crlf_if"])
    print(f"  CRLF `if ...; then\\r ... fi\\r` (bash: syntax error): {r}")
    r = tree(CASES["bad_stray_fi"])
    print(f"  stray `fi` (bash: syntax error): {r}")
    r = tree(CASES["bad_empty_do"])
    print(f"  `while true; do done` (bash: syntax error): {r}")
    r = tree("cat <\npython train.py\n")
    print(f"  `cat <` then `python train.py` (bash: syntax error near newline): {r}")
    r = tree(CASES["bad_unclosed_dq"])
    print(f"  unclosed `\"` (bash: unexpected EOF): {r}; has_error={r.has_error}; commands after the error: "
          f"{sum(1 for n in _nodes(r) if n.type == 'command') - 1}")


def _nodes(node):
    yield node
    for c in node.children:
        yield from _nodes(c)


def import_cost(repeat: int) -> tuple[float, float, float]:
    """Seconds to import each front end in a fresh interpreter (median): trainlint loads its shell modules on the
    first launcher read, so this is paid once per run that reads a launcher."""
    def run(code: str) -> float:
        r = subprocess.run([sys.executable, "-c", "import time; t = time.perf_counter(); " + code +
                            "; print(time.perf_counter() - t)"], capture_output=True, text=True, check=True)
        return float(r.stdout.split()[-1])

    ts_code = ("import tree_sitter as ts, tree_sitter_bash as tsb; ts.Parser(ts.Language(tsb.language()))"
               ".parse(b'echo\\n')")
    tl_code = "import trainlint.launch.shell_run"
    tl_front = "import trainlint.launch.shell_lex, trainlint.launch.shell_parse"
    return (statistics.median(run(ts_code) for _ in range(repeat)),
            statistics.median(run(tl_code) for _ in range(repeat)),
            statistics.median(run(tl_front) for _ in range(repeat)))


def interleaved(fns: dict, texts: dict, repeat: int, passes: int) -> dict[str, list[float]]:
    """CPU seconds (process_time) for one pass over all inputs, per front end; `repeat` rounds, each timing every
    front end in turn over `passes` passes, so a busy neighbour on a shared machine weighs on all of them alike."""
    out: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            xs = texts[k]
            t = time.process_time()
            for _ in range(passes):
                for x in xs:
                    fn(x)
            out[k].append((time.process_time() - t) / passes)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--passes", type=int, default=10, help="passes over all inputs per timed round")
    ap.add_argument("--show", help="print tree-sitter's tree for this input name and stop")
    ns = ap.parse_args()

    import tree_sitter as ts
    import tree_sitter_bash as tsb

    from trainlint.launch.shell import read_shell
    from trainlint.launch.shell_lex import Lexer
    from trainlint.launch.shell_parse import Parser

    lang = ts.Language(tsb.language())
    parser = ts.Parser(lang)

    inputs: list[tuple[str, str, str]] = []  # group, name, text
    for p in fixture_files():
        inputs.append(("fixture", str(p.relative_to(ROOT / "tests" / "fixtures")), p.read_text()))
    inputs.append(("stress", "stress.sh", STRESS))
    for name, text in embedded_texts():
        inputs.append(("test", name, text))
    for name, text in CASES.items():
        inputs.append(("case", name, text))

    if ns.show:
        for _, name, text in inputs:
            if name == ns.show:
                print(str(parser.parse(text.encode()).root_node))
                return 0
        print("no input", ns.show)
        return 1

    print(f"python {sys.version.split()[0]}  tree-sitter {version('tree-sitter')}  "
          f"tree-sitter-bash {version('tree-sitter-bash')}  language ABI {lang.abi_version}")
    print()
    print(f"{'group':8} {'input':52} {'bytes':>6} {'bash -n':>7} {'ts ERR':>6} {'ts MISS':>7} {'tl probs':>8}")
    rows = []
    for group, name, text in inputs:
        verdict = bash_verdict(text)
        err, miss = ts_counts(parser.parse(text.encode()))
        probs = read_shell(text, Path(name.split(":")[0] if group == "test" else name)).problems
        rows.append((group, name, len(text.encode()), verdict, err, miss, probs))
        print(f"{group:8} {name[:52]:52} {len(text.encode()):>6} {verdict:>7} {err:>6} {miss:>7} {len(probs):>8}")

    print()
    print("summary by group and bash's verdict: inputs / tree-sitter flags (ERROR or MISSING > 0) / "
          "trainlint reports (problems > 0)")
    keys = sorted({(r[0], r[3]) for r in rows})
    for g, v in keys:
        sel = [r for r in rows if r[0] == g and r[3] == v]
        ts_flag = sum(1 for r in sel if r[4] + r[5] > 0)
        tl_flag = sum(1 for r in sel if r[6])
        print(f"  {g:8} bash {v:4}: {len(sel):3} inputs, tree-sitter flags {ts_flag:3}, trainlint reports {tl_flag:3}")

    print()
    print("disagreements (bash ok but tree-sitter flags; bash ERR/warn but tree-sitter silent; trainlint's messages):")
    for group, name, _, verdict, err, miss, probs in rows:
        ts_flag = err + miss > 0
        if (verdict == "ok" and ts_flag) or (verdict in ("ERR", "warn") and not ts_flag) or \
                (verdict in ("ERR", "warn") and not probs) or (verdict == "ok" and probs):
            msg = probs[0].message[:90] if probs else "-"
            print(f"  {name[:40]:40} bash {verdict:4} ts ERR/MISS {err}/{miss}  trainlint: {len(probs)} {msg}")

    corpus = [r for r in rows if r[3] != "ERR"]
    texts = [t for g, n, t in inputs if any(r[1] == n and r[3] != "ERR" for r in rows)]
    btexts = [t.encode() for t in texts]
    total = sum(len(b) for b in btexts)

    def tl_front(t: str) -> None:
        problems: list = []
        Parser(Lexer(t, problems).tokens(), problems).parse()

    fns = {"ts": parser.parse, "ts_walk": lambda b: ts_walk(parser.parse(b)), "tl_front": tl_front,
           "tl_all": lambda t: read_shell(t, Path("run.sh"))}
    runs = interleaved(fns, {"ts": btexts, "ts_walk": btexts, "tl_front": texts, "tl_all": texts},
                       ns.repeat, ns.passes)
    med = {k: statistics.median(v) for k, v in runs.items()}
    print()
    print(f"CPU time of one pass over the {len(corpus)} inputs bash accepts ({total} bytes): median of {ns.repeat} "
          f"rounds of {ns.passes} passes, interleaved [min-max of the rounds]:")
    for k, label in (("ts", "tree-sitter parse (C, tree not visited)"),
                     ("ts_walk", "tree-sitter parse + visit every node from Python"),
                     ("tl_front", "trainlint Lexer + Parser (what tree-sitter would replace)"),
                     ("tl_all", "trainlint read_shell (lex, parse, evaluate, launches)")):
        print(f"  {label:60} {med[k] * 1000:7.2f} ms [{min(runs[k]) * 1000:.2f}-{max(runs[k]) * 1000:.2f}]"
              f"  {total / med[k] / 1e6:6.2f} MB/s")

    def ratio(a: str, b: str) -> float:  # median over rounds of the per-round ratio
        return statistics.median(x / y for x, y in zip(runs[a], runs[b]))

    print(f"  per-round ratios (median): trainlint Lexer+Parser / tree-sitter parse {ratio('tl_front', 'ts'):.1f}x, "
          f"/ tree-sitter parse+visit {ratio('tl_front', 'ts_walk'):.1f}x; Lexer+Parser / read_shell "
          f"{ratio('tl_front', 'tl_all'):.0%}")
    ts_imp, tl_imp, tl_front_imp = import_cost(ns.repeat)
    print(f"  import, fresh interpreter (median of {ns.repeat}): tree_sitter + tree_sitter_bash + one parse "
          f"{ts_imp * 1000:.1f} ms; trainlint shell_lex + shell_parse {tl_front_imp * 1000:.1f} ms; "
          f"trainlint.launch.shell_run (the whole reader) {tl_imp * 1000:.1f} ms")
    structure_checks(parser)
    return 0


if __name__ == "__main__":
    sys.exit(main())
