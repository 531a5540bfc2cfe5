"""Builds a tiny random-weight Llama and its tokenizer, offline, for the real-engine lab.

The weights are random: the engine's metrics (timings, queueing, KV cache, preemptions) are real,
the text it writes is not. Usage: python make_model.py OUT_DIR
"""
import json
import os
import sys

from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

out = sys.argv[1]
if os.path.exists(os.path.join(out, "config.json")):
    print(f"real-engine lab: model already in {out}", file=sys.stderr)
    sys.exit(0)
os.makedirs(out, exist_ok=True)

# Any local text will do for a byte-level BPE: this script and Python's own sources.
corpus = []
import glob
for path in sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))[:200]:
    with open(path, encoding="utf-8", errors="ignore") as f:
        corpus.append(f.read())

tok = Tokenizer(models.BPE(unk_token=None))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
special = ["<s>", "</s>", "<pad>"]
trainer = trainers.BpeTrainer(vocab_size=4096, special_tokens=special,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tok.train_from_iterator(corpus, trainer=trainer)

fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
fast.chat_template = (
    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant: {% endif %}"
)
fast.save_pretrained(out)

config = LlamaConfig(
    vocab_size=len(fast),
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=4,
    max_position_embeddings=2048,
    bos_token_id=fast.bos_token_id,
    eos_token_id=fast.eos_token_id,
    pad_token_id=fast.pad_token_id,
    tie_word_embeddings=False,
)
model = LlamaForCausalLM(config)
model.save_pretrained(out)
with open(os.path.join(out, "generation_config.json"), "w") as f:
    json.dump({"bos_token_id": fast.bos_token_id, "eos_token_id": fast.eos_token_id}, f)
print(f"real-engine lab: tiny Llama ({sum(p.numel() for p in model.parameters())} parameters) in {out}", file=sys.stderr)
