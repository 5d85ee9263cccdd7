"""Make a tiny, randomly initialised causal language model and its tokenizer in a directory.

Run with the worker environment's interpreter: ``python tiny_model.py DIR``. The
tokenizer is a word-level one trained here on the words the worker's prompts use
(plus the action names), so nothing is downloaded; the model is a 2-layer GPT-2 of
width 32 with seeded weights. It answers nonsense, which is what a test of the
transformers backend needs: real tokenising, real generation, replies to parse.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from balrog_worker.text import ACTIONS, system_prompt


def main(folder: str) -> None:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    corpus = [system_prompt("MiniGrid-Empty-5x5-v0"), *ACTIONS, "ACTION : go forward turn left",
              "Mission : get to the green goal square You see : a wall 1 step forward steps left right",
              "You carry nothing . What do you do ? red green blue purple yellow grey ball key box door goal"]
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]", "[EOS]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                   eos_token="[EOS]")
    fast.save_pretrained(out)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(fast), n_positions=2048, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=fast.eos_token_id, eos_token_id=fast.eos_token_id)
    GPT2LMHeadModel(config).save_pretrained(out)


if __name__ == "__main__":
    main(sys.argv[1])
