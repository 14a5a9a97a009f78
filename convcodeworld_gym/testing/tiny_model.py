"""Tiny randomly initialised causal LMs built from a config: trainer tests and smoke runs on CPU, no download.

Holds:
    tiny_model       a 2-layer Llama with a byte-level tokenizer (any text encodes), optionally with a chat template
                     and special tokens
    tiny_tool_model  the same with TRL's Qwen3 chat template and its special tokens, so that TRL renders tools
                     and parses ``<tool_call>`` blocks out of a completion
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["tiny_model", "tiny_tool_model"]

#: The Qwen3 chat template's special tokens (skipped when decoding) and its other added tokens (kept, so that a
#: completion's ``<tool_call>`` block decodes with its tags and parses).
QWEN3_SPECIAL = ("<|im_start|>", "<|im_end|>")
QWEN3_ADDED = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>")


def tiny_model(seed: int = 0, *, chat_template: str | None = None, special_tokens: Sequence[str] = (),
               added_tokens: Sequence[str] = (), eos_token: str = "</s>") -> tuple[Any, Any]:
    """A 2-layer Llama (hidden size 32) and a byte-level tokenizer with ``special_tokens`` and ``added_tokens`` (one
    id each, kept when decoding) added: ``(model, tokenizer)``, left-padded. Needs torch, transformers and
    tokenizers (the ``train`` extra)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token=eos_token, pad_token="<pad>")
    if special_tokens:
        tokenizer.add_special_tokens({"additional_special_tokens": list(special_tokens)})
    if added_tokens:
        tokenizer.add_tokens(list(added_tokens), special_tokens=False)
    tokenizer.padding_side = "left"
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=8192,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(config), tokenizer


def tiny_tool_model(seed: int = 0) -> tuple[Any, Any]:
    """:func:`tiny_model` with TRL's Qwen3 chat template (which TRL recognises, rendering tools in the prompt and
    parsing ``<tool_call>`` blocks out of completions) and its special tokens; ``<|im_end|>`` ends a turn."""
    from trl.chat_template_utils import qwen3_chat_template

    return tiny_model(seed, chat_template=qwen3_chat_template, special_tokens=QWEN3_SPECIAL, added_tokens=QWEN3_ADDED,
                      eos_token="<|im_end|>")
