"""PyTorch twins of dle.models' GPT-2 and Llama for tests/models_spec.lua (no transformers needed):
plain torch modules with Hugging Face's parameter names and layouts (GPT-2's Conv1D weights {in, out}),
small random weights, written as a Hugging Face checkpoint directory (config.json + safetensors,
optionally sharded with an index, optionally some tensors in float16/bfloat16), plus reference.safetensors:
the prompt ids, its logits, the greedy continuation (full recomputation each step, no cache) and the
gradients of loss = sum(logits * sin(arange)) for a few parameters.
    python3 llm_twins.py gpt2|llama OUTDIR [--shards] [--half] [--gqa] [--tied]"""
import json
import math
import struct
import sys

import torch

arch, out = sys.argv[1], sys.argv[2]
flags = set(sys.argv[3:])
torch.manual_seed(7)
V, T_MAX = 96, 64


def gelu_new(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


class GPT2(torch.nn.Module):
    def __init__(s, c):
        super().__init__()
        s.c = c
        d, L = c["n_embd"], c["n_layer"]
        p = {"transformer.wte.weight": (V, d), "transformer.wpe.weight": (c["n_positions"], d),
             "transformer.ln_f.weight": (d,), "transformer.ln_f.bias": (d,)}
        for i in range(L):
            h = f"transformer.h.{i}."
            p.update({h + "ln_1.weight": (d,), h + "ln_1.bias": (d,), h + "ln_2.weight": (d,), h + "ln_2.bias": (d,),
                      h + "attn.c_attn.weight": (d, 3 * d), h + "attn.c_attn.bias": (3 * d,),
                      h + "attn.c_proj.weight": (d, d), h + "attn.c_proj.bias": (d,),
                      h + "mlp.c_fc.weight": (d, 4 * d), h + "mlp.c_fc.bias": (4 * d,),
                      h + "mlp.c_proj.weight": (4 * d, d), h + "mlp.c_proj.bias": (d,)})
        s.w = torch.nn.ParameterDict({k.replace(".", "__"): torch.nn.Parameter(
            1 + 0.1 * torch.randn(sh) if k.endswith("ln_1.weight") or k.endswith("ln_2.weight") or k.endswith("ln_f.weight")
            else 0.2 * torch.randn(sh)) for k, sh in p.items()})

    def W(s, k):
        return s.w[k.replace(".", "__")]

    def forward(s, ids):
        c, W = s.c, s.W
        B, T = ids.shape
        d, H = c["n_embd"], c["n_head"]
        x = W("transformer.wte.weight")[ids] + W("transformer.wpe.weight")[:T]
        for i in range(c["n_layer"]):
            h = f"transformer.h.{i}."
            y = torch.nn.functional.layer_norm(x, (d,), W(h + "ln_1.weight"), W(h + "ln_1.bias"), 1e-5)
            qkv = y @ W(h + "attn.c_attn.weight") + W(h + "attn.c_attn.bias")
            q, k, v = qkv.split(d, dim=2)
            q, k, v = (t.view(B, T, H, d // H).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-1, -2)) / math.sqrt(d // H)
            att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
            o = (att @ v).transpose(1, 2).reshape(B, T, d)
            x = x + o @ W(h + "attn.c_proj.weight") + W(h + "attn.c_proj.bias")
            y = torch.nn.functional.layer_norm(x, (d,), W(h + "ln_2.weight"), W(h + "ln_2.bias"), 1e-5)
            x = x + gelu_new(y @ W(h + "mlp.c_fc.weight") + W(h + "mlp.c_fc.bias")) @ W(h + "mlp.c_proj.weight") \
                + W(h + "mlp.c_proj.bias")
        x = torch.nn.functional.layer_norm(x, (d,), W("transformer.ln_f.weight"), W("transformer.ln_f.bias"), 1e-5)
        return x @ W("transformer.wte.weight").t()


def rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Llama(torch.nn.Module):
    def __init__(s, c):
        super().__init__()
        s.c = c
        d, L, H, Hkv, hd, I = (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                               c["num_key_value_heads"], c["head_dim"], c["intermediate_size"])
        p = {"model.embed_tokens.weight": (V, d), "model.norm.weight": (d,)}
        if not c["tie_word_embeddings"]:
            p["lm_head.weight"] = (V, d)
        for i in range(L):
            h = f"model.layers.{i}."
            p.update({h + "input_layernorm.weight": (d,), h + "post_attention_layernorm.weight": (d,),
                      h + "self_attn.q_proj.weight": (H * hd, d), h + "self_attn.k_proj.weight": (Hkv * hd, d),
                      h + "self_attn.v_proj.weight": (Hkv * hd, d), h + "self_attn.o_proj.weight": (d, H * hd),
                      h + "mlp.gate_proj.weight": (I, d), h + "mlp.up_proj.weight": (I, d),
                      h + "mlp.down_proj.weight": (d, I)})
        s.w = torch.nn.ParameterDict({k.replace(".", "__"): torch.nn.Parameter(
            1 + 0.1 * torch.randn(sh) if "norm" in k else 0.2 * torch.randn(sh)) for k, sh in p.items()})

    def W(s, k):
        return s.w[k.replace(".", "__")]

    def forward(s, ids):
        c, W = s.c, s.W
        B, T = ids.shape
        H, Hkv, hd, eps = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["rms_norm_eps"]
        inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        freqs = torch.arange(T).float()[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = W("model.embed_tokens.weight")[ids]
        for i in range(c["num_hidden_layers"]):
            h = f"model.layers.{i}."
            y = rms(x, W(h + "input_layernorm.weight"), eps)
            q = (y @ W(h + "self_attn.q_proj.weight").t()).view(B, T, H, hd).transpose(1, 2)
            k = (y @ W(h + "self_attn.k_proj.weight").t()).view(B, T, Hkv, hd).transpose(1, 2)
            v = (y @ W(h + "self_attn.v_proj.weight").t()).view(B, T, Hkv, hd).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
            att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
            att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
            x = x + (att @ v).transpose(1, 2).reshape(B, T, H * hd) @ W(h + "self_attn.o_proj.weight").t()
            y = rms(x, W(h + "post_attention_layernorm.weight"), eps)
            g = torch.nn.functional.silu(y @ W(h + "mlp.gate_proj.weight").t()) * (y @ W(h + "mlp.up_proj.weight").t())
            x = x + g @ W(h + "mlp.down_proj.weight").t()
        x = rms(x, W("model.norm.weight"), eps)
        head = W("model.embed_tokens.weight") if c["tie_word_embeddings"] else W("lm_head.weight")
        return x @ head.t()


ST = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64"}


def save_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        b = t.view(torch.uint8).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": ST[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


if arch == "gpt2":
    config = {"model_type": "gpt2", "vocab_size": V, "n_positions": T_MAX, "n_embd": 32, "n_layer": 2, "n_head": 4,
              "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new", "n_inner": None}
    model = GPT2(config)
else:
    config = {"model_type": "llama", "vocab_size": V, "hidden_size": 32, "intermediate_size": 48,
              "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2 if "--gqa" in flags else 4, "head_dim": 8, "rms_norm_eps": 1e-5,
              "rope_theta": 500.0, "max_position_embeddings": T_MAX, "tie_word_embeddings": "--tied" in flags,
              "rope_scaling": None}
    model = Llama(config)

weights = {k.replace("__", "."): v for k, v in model.w.items()}
if "--half" in flags:  # some tensors stored in 16-bit floats; the reference runs on the rounded values
    with torch.no_grad():
        for i, k in enumerate(sorted(weights)):
            if i % 3 == 1:
                dt = torch.float16 if i % 2 else torch.bfloat16
                weights[k].copy_(weights[k].to(dt).float())
                weights[k] = weights[k].detach().to(dt)
with open(f"{out}/config.json", "w") as f:
    json.dump(config, f)
if "--shards" in flags:
    names = sorted(weights)
    parts = [names[: len(names) // 2], names[len(names) // 2:]]
    wmap = {}
    for j, part in enumerate(parts):
        fname = f"model-0000{j + 1}-of-00002.safetensors"
        save_safetensors(f"{out}/{fname}", {k: weights[k] for k in part})
        wmap.update({k: fname for k in part})
    with open(f"{out}/model.safetensors.index.json", "w") as f:
        json.dump({"metadata": {}, "weight_map": wmap}, f)
else:
    save_safetensors(f"{out}/model.safetensors", weights)

ids = torch.randint(0, V, (2, 7))
logits = model(ids)
wgt = torch.sin(torch.arange(logits.numel(), dtype=torch.float32)).reshape(logits.shape)
(logits * wgt).sum().backward()
ref = {"ids": ids, "logits": logits.detach()}
grad_names = (["transformer.h.1.attn.c_attn.weight", "transformer.wte.weight", "transformer.h.0.ln_1.weight"]
              if arch == "gpt2" else
              ["model.layers.1.self_attn.k_proj.weight", "model.layers.0.self_attn.q_proj.weight",
               "model.embed_tokens.weight", "model.layers.0.input_layernorm.weight"])
for k in grad_names:
    ref["grad." + k] = model.W(k).grad
with torch.no_grad():
    seq = ids[:1]
    for _ in range(10):
        nxt = model(seq)[:, -1].argmax(-1, keepdim=True)
        seq = torch.cat([seq, nxt], dim=1)
ref["greedy"] = seq
save_safetensors(f"{out}/reference.safetensors", ref)
print("ok")
