"""A tiny, randomly initialised causal language model and its tokenizer, for offline tests and dry runs.

``make(folder, corpus)`` trains a word-level tokenizer on ``corpus`` (the words a
worker's prompts use, so nothing is downloaded) and saves it beside a 2-layer GPT-2
of width 32 with seeded weights. The model answers nonsense, which is what a test
of the transformers backend needs: real tokenising, real generation, replies to
parse. Needs ``torch``, ``tokenizers`` and ``transformers``.

``python -m mosaic.testing.tiny_model DIR [TEXT ...]`` makes one from the given texts.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable


def make(folder: str | Path, corpus: Iterable[str]) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(list(corpus), trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]",
                                                                                          "[EOS]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                   eos_token="[EOS]")
    fast.save_pretrained(out)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(fast), n_positions=2048, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=fast.eos_token_id, eos_token_id=fast.eos_token_id)
    GPT2LMHeadModel(config).save_pretrained(out)
    return out


if __name__ == "__main__":
    make(sys.argv[1], sys.argv[2:] or ["ACTION : a b c"])
