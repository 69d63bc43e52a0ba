"""Fine-tune the packaged Gemma 3 270M (dequantized from its GGUF) into a reader that follows the gate's
instruction: JSON answers ``{"answer": ...}``, ``null`` when the documents do not answer. Then write it as a
Hugging Face folder (bf16, with a Gemma chat template) and as a GGUF in the packaged file's Q4_K_M layout.

Full fine-tune, one pass over ``gpu_data.training_set`` (never the golden set's articles) within a time budget:
AdamW, bf16 autocast over fp32 weights, the loss on the reply tokens only (the LM head runs on those positions alone,
so a 262k-token vocabulary costs nothing on the prompt). Run on the GPU machine (``gpu_arms`` starts it in its own
process, which has exited, its GPU memory free, before any vLLM engine profiles memory; the GGUF is then written by
a second process that never touches the GPU, while the engines start):

    python -m ragtrim_bench.gate.gpu_finetune --data DATA --base BASE_HF_DIR --gguf GGUF --out OUT_DIR
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragtrim.gate.golden import GoldenItem
from ragtrim.gate.prompt import build_messages

CHAT_TEMPLATE = (
    "{{ bos_token }}{% set ns = namespace(system='') %}"
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}{% set ns.system = ns.system + m['content'] + '\n\n' %}"
    "{% else %}"
    "{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else 'user') + '\n' }}"
    "{% if m['role'] == 'user' %}{{ ns.system }}{% set ns.system = '' %}{% endif %}"
    "{{ m['content'] + '<end_of_turn>\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)
"""Gemma's turn format; Gemma has no system role, so system text opens the next user turn (as Gemma's own template
does). The reader stops at ``<end_of_turn>``."""
END_OF_TURN = "<end_of_turn>"
END_OF_TURN_ID = 106
READY = ".ready"
"""Written into the reader's folder once it is complete."""


def render_chat(messages: Sequence[dict[str, Any]], *, add_generation_prompt: bool = True) -> str:
    """``CHAT_TEMPLATE`` applied as transformers (and so vLLM) applies it: a sandboxed Jinja environment with
    ``trim_blocks`` and ``lstrip_blocks``."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(CHAT_TEMPLATE).render(messages=list(messages), bos_token="<bos>",
                                                 add_generation_prompt=add_generation_prompt)


def encode_examples(items: Sequence[GoldenItem], tokenizer: Any, targets: Sequence[str], max_len: int
                    ) -> tuple[list[tuple[list[int], list[int]]], int]:
    """``(prompt ids, reply ids)`` per item (the reply ends with ``<end_of_turn>``), and how many were left out for
    being longer than ``max_len``."""
    out, too_long = [], 0
    for item, target in zip(items, targets, strict=True):
        prompt = render_chat(build_messages(item, item.documents, in_field=False))
        p = tokenizer.encode(prompt, add_special_tokens=False).ids
        t = tokenizer.encode(target + END_OF_TURN, add_special_tokens=False).ids
        if len(p) + len(t) > max_len:
            too_long += 1
            continue
        out.append((p, t))
    return out, too_long


def batches(examples: Sequence[tuple[list[int], list[int]]], batch_tokens: int, seed: int) -> list[list[int]]:
    """Example indices grouped by length so that each batch pads to at most ``batch_tokens``; batches shuffled."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]) + len(examples[i][1]))
    out: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        n = len(examples[i][0]) + len(examples[i][1])
        if current and max(longest, n) * (len(current) + 1) > batch_tokens:
            out.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, n)
    if current:
        out.append(current)
    random.Random(seed).shuffle(out)
    return out


def train(base: Path, examples: Sequence[tuple[list[int], list[int]]], *, seconds: float, lr: float,
          batch_tokens: int, seed: int, device: str = "cuda") -> tuple[Any, dict[str, Any]]:
    """One pass (or ``seconds``) of supervised fine-tuning; returns the model and the run's figures."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    auto: Any = AutoModelForCausalLM
    model = auto.from_pretrained(str(base), dtype=torch.float32, attn_implementation="sdpa").to(device)
    model.train()
    groups = batches(examples, batch_tokens, seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    warmup = min(20, max(1, len(groups) // 10))

    def factor(step: int) -> float:  # linear warm-up, then linear decay to a tenth
        if step < warmup:
            return (step + 1) / warmup
        return max(0.1, 1 - 0.9 * (step - warmup) / max(1, len(groups) - warmup))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    cap = getattr(model.config, "final_logit_softcapping", None)
    started = time.perf_counter()
    losses: list[tuple[int, float]] = []
    tokens = steps = 0
    for step, group in enumerate(groups):
        if time.perf_counter() - started > seconds:
            break
        width = max(len(examples[i][0]) + len(examples[i][1]) for i in group)
        ids = torch.zeros((len(group), width), dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        rows, cols, targets = [], [], []
        for r, i in enumerate(group):
            p, t = examples[i]
            seq = p + t
            ids[r, :len(seq)] = torch.tensor(seq)
            mask[r, :len(seq)] = 1
            rows += [r] * len(t)
            cols += list(range(len(p) - 1, len(p) + len(t) - 1))
            targets += t
        ids, mask = ids.to(device, non_blocking=True), mask.to(device, non_blocking=True)
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16):
            hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
            logits = model.lm_head(hidden[torch.tensor(rows, device=device), torch.tensor(cols, device=device)])
        logits = logits.float()
        if cap:
            logits = torch.tanh(logits / cap) * cap
        loss: Any = F.cross_entropy(logits, torch.tensor(targets, device=logits.device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        tokens += int(mask.sum())
        steps = step + 1
        if step % 10 == 0 or step == len(groups) - 1:
            losses.append((step, round(float(loss.detach()), 4)))
            print(f"[finetune] step {step}/{len(groups)} loss {losses[-1][1]:.4f} "
                  f"{time.perf_counter() - started:.0f} s", flush=True)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds_used = time.perf_counter() - started
    return model, {"steps": steps, "planned_steps": len(groups), "epoch_done": steps == len(groups),
                   "examples_seen": sum(len(g) for g in groups[:steps]), "tokens": tokens,
                   "seconds": round(seconds_used, 1), "tokens_per_s": round(tokens / max(seconds_used, 1e-9)),
                   "lr": lr, "batch_tokens": batch_tokens, "warmup_steps": warmup, "loss_every_10_steps": losses}


def save_reader(model: Any, base: Path, out: Path) -> None:
    """The tuned weights as ``base``'s safetensors names in bf16, beside its config and tokenizer, with the chat
    template and ``<end_of_turn>`` as the end of a reply."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    with safe_open(str(base / "model.safetensors"), framework="pt") as f:
        names = list(f.keys())  # tied lm_head is not among them
    state = model.state_dict()
    save_file({n: state[n].detach().to(torch.bfloat16).contiguous().cpu() for n in names},
              str(out / "model.safetensors"), metadata={"format": "pt"})
    for name in ("config.json", "tokenizer.json"):
        shutil.copyfile(base / name, out / name)
    tok_config = json.loads((base / "tokenizer_config.json").read_text(encoding="utf-8"))
    tok_config.update(chat_template=CHAT_TEMPLATE, eos_token=END_OF_TURN)
    (out / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=1), encoding="utf-8")
    specials = json.loads((base / "special_tokens_map.json").read_text(encoding="utf-8"))
    specials["eos_token"] = END_OF_TURN
    (out / "special_tokens_map.json").write_text(json.dumps(specials, indent=1), encoding="utf-8")
    gen = json.loads((base / "generation_config.json").read_text(encoding="utf-8"))
    first = gen.get("eos_token_id", 1)
    gen["eos_token_id"] = sorted({*(first if isinstance(first, list) else [first]), END_OF_TURN_ID})
    (out / "generation_config.json").write_text(json.dumps(gen, indent=1), encoding="utf-8")


def write_gguf(reader_dir: Path, template: Path, out: Path) -> Path:
    """The tuned reader as a GGUF with the packaged file's metadata and per-tensor types (Q4_K_M)."""
    import numpy as np
    import torch  # the bf16 safetensors are read through torch: numpy has no bfloat16
    from safetensors.torch import load_file

    from ragtrim_bench.models.gemma import hf_tensor_name
    from ragtrim_bench.models.gguf_write import write_like

    state = load_file(str(reader_dir / "model.safetensors"))

    def weights(gguf_name: str) -> np.ndarray:
        hf = hf_tensor_name(gguf_name)
        values = np.asarray(state[hf].to(torch.float32).numpy(), dtype=np.float32)
        # llama.cpp stores Gemma's RMSNorm weights as 1 + w (models.gemma subtracts it when dequantizing)
        return values + 1.0 if hf.endswith("norm.weight") else values

    return write_like(template, weights, out, metadata={"general.name": "gemma-3-270m ragtrim gate reader"})


def main(argv: Sequence[str] | None = None) -> int:
    from tokenizers import Tokenizer

    from ragtrim_bench.gate.gpu_data import target_text, training_set

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="the shared data folder (squad-v2-dev-cs224n, nq-multidoc)")
    p.add_argument("--base", required=True, help="the 270M Hugging Face folder (models.gemma.write_hf_model_dir)")
    p.add_argument("--gguf", required=True, help="the packaged GGUF: the template of the Q4_K_M output")
    p.add_argument("--out", required=True, help="folder for the reader (HF folder reader/, reader-q4_k_m.gguf)")
    p.add_argument("--seconds", type=float, default=150.0, help="training time budget (default 150 s)")
    p.add_argument("--lr", type=float, default=8e-5)
    p.add_argument("--batch-tokens", type=int, default=32768)
    p.add_argument("--max-len", type=int, default=4096)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda", help="cuda (default); cpu for a smoke run of a few steps")
    p.add_argument("--limit", type=int, default=None, help="only the first N training items (a smoke run)")
    p.add_argument("--skip-gguf", action="store_true", help="train and write the reader only")
    p.add_argument("--gguf-only", action="store_true", help="write the GGUF of an existing reader only (no GPU)")
    args = p.parse_args(argv)
    started = time.perf_counter()
    out = Path(args.out)
    if args.gguf_only:
        write_gguf(out / "reader", Path(args.gguf), out / "reader-q4_k_m.gguf")
        print(f"[finetune] gguf written in {time.perf_counter() - started:.1f} s", flush=True)
        return 0
    items, split = training_set(Path(args.data))
    items = items[: args.limit] if args.limit else items
    tokenizer = Tokenizer.from_file(str(Path(args.base) / "tokenizer.json"))
    examples, too_long = encode_examples(items, tokenizer, [target_text(i) for i in items], args.max_len)
    prep_s = time.perf_counter() - started
    model, run = train(Path(args.base), examples, seconds=args.seconds, lr=args.lr, batch_tokens=args.batch_tokens,
                       seed=args.seed, device=args.device)
    save_reader(model, Path(args.base), out / "reader")
    (out / "reader" / READY).write_text("", encoding="utf-8")
    del model
    gguf_started = time.perf_counter()
    if not args.skip_gguf:
        write_gguf(out / "reader", Path(args.gguf), out / "reader-q4_k_m.gguf")
    info = {"split": split, "examples": len(examples), "left_out_too_long": too_long, "prepare_s": round(prep_s, 1),
            "train": run, "gguf_s": None if args.skip_gguf else round(time.perf_counter() - gguf_started, 1),
            "prompt_tokens_mean": round(sum(len(e[0]) for e in examples) / max(1, len(examples)), 1),
            "seconds": round(time.perf_counter() - started, 1)}
    (out / "finetune.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    print(f"[finetune] done: {run['steps']}/{run['planned_steps']} steps, {run['tokens']:,} tokens in "
          f"{run['seconds']} s; gguf {info['gguf_s']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
