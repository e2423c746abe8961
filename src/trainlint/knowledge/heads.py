"""What the loading class puts on top of the backbone, and so how wide the logits the loss sees are.

`*ForCausalLM`, `*ForConditionalGeneration`, `*Seq2SeqLM`, `*ForMaskedLM`, `*LMHeadModel` project every token onto
the vocabulary; `*ForSequenceClassification`, `*ForTokenClassification`, `*ForQuestionAnswering`, image/audio
classification project onto `num_labels`; `AutoModel` / `XModel` have no head at all. Only the first kind has a
vocabulary-sized logits tensor for TL301 to speak about.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# transformers==5.24.0 configuration_utils.py PretrainedConfig.__init__: "Keep the default value of num_labels=2"
# (num_labels is 2 unless the config's id2label or the from_pretrained call says otherwise).
DEFAULT_NUM_LABELS = 2

_VOCAB = re.compile(r"(ForCausalLM|LMHeadModel|ForConditionalGeneration|Seq2SeqLM|ForMaskedLM|WithLMHead|ForPreTraining"
                    r"|ForVision2Seq|ForImageTextToText|ForSpeechSeq2Seq|ForTextToSpeech)$")
# (pattern, logits per token?) -- sequence and image/audio classifiers emit one row per example
_LABELS = ((re.compile(r"ForSequenceClassification$|ForImageClassification$|ForAudioClassification$"
                       r"|ForVideoClassification$|ForMultipleChoice$|ForNextSentencePrediction$"), False),
           (re.compile(r"ForTokenClassification$|ForQuestionAnswering$|ForAudioFrameClassification$"), True))


@dataclass(frozen=True)
class Head:
    kind: str  # "vocab" | "labels" | "none"
    per_token: bool = True  # logits for every token (False: one row per example)


def head_for(class_name: str | None, load_kind: str = "from_pretrained") -> Head | None:
    """The head a loading class builds; None when the class does not say (a repository's own class)."""
    if load_kind == "trainer_string":
        return Head("vocab")  # TRL trainers given a model id load it with AutoModelForCausalLM
    if not class_name:
        return None
    if _VOCAB.search(class_name):
        return Head("vocab")
    for pattern, per_token in _LABELS:
        if pattern.search(class_name):
            return Head("labels", per_token)
    if class_name == "AutoModel" or re.fullmatch(r"[A-Z]\w*Model", class_name) and not class_name.startswith(
            ("AutoModelFor", "Peft", "PreTrained", "AutoPeft")):
        return Head("none", False)
    return None


def computes_vocab_logits(class_name: str | None, load_kind: str = "from_pretrained") -> bool:
    """False only when the class is known to build a non-vocabulary head (or none)."""
    head = head_for(class_name, load_kind)
    return head is None or head.kind == "vocab"
