--- bench/entries_llm.lua — language models, random weights, PyTorch twins in plain torch ops:
--   gpt2_decode      greedy generation with a KV cache of a GPT-2-shaped model (6 layers, width
--                    384, 6 heads, vocab 50257) from a 16-token prompt, 32 new tokens per
--                    iteration (prefill included), in tokens/s; PyTorch eager with its own
--                    preallocated KV cache (issue 20's target: >= 1.2x)
--   train_gpt2_124m  one training step of GPT-2 124M (12 layers, width 768, tied embeddings),
--                    batch 4 x 64 tokens: forward, cross-entropy, backward, AdamW step (issue 20's
--                    target: <= 0.9x PyTorch's time at its best thread setting)
local PROMPT, NEW = 16, 32
local V, C, L, NH = 50257, 384, 6, 6

-- The PyTorch twin: GPT-2 blocks in plain torch ops, keys and values written into preallocated
-- caches, the last position's logits only.
local TORCH_SETUP = string.format([[
import math
F = torch.nn.functional
V, C, L, H = %d, %d, %d, %d
D = C // H
def rnd(*s): return torch.randn(*s) * 0.02
wte, wpe = rnd(V, C), rnd(1024, C)
blocks = [dict(ln1w=torch.ones(C), ln1b=torch.zeros(C), aw=rnd(3 * C, C), ab=torch.zeros(3 * C), pw=rnd(C, C),
               pb=torch.zeros(C), ln2w=torch.ones(C), ln2b=torch.zeros(C), fw=rnd(4 * C, C), fb=torch.zeros(4 * C),
               qw=rnd(C, 4 * C), qb=torch.zeros(C)) for _ in range(L)]
lnfw, lnfb = torch.ones(C), torch.zeros(C)
def forward(ids, kc, vc, pos):
    B, T = ids.shape
    x = wte[ids] + wpe[pos:pos + T]
    for i, b in enumerate(blocks):
        h = F.layer_norm(x, (C,), b["ln1w"], b["ln1b"])
        q, k, v = (t.transpose(1, 2) for t in F.linear(h, b["aw"], b["ab"]).view(B, T, 3, H, D).unbind(2))
        kc[i][:, :, pos:pos + T] = k
        vc[i][:, :, pos:pos + T] = v
        att = q @ kc[i][:, :, :pos + T].transpose(-1, -2) / math.sqrt(D)
        if T > 1:
            att = att.masked_fill(torch.ones(T, pos + T, dtype=torch.bool).triu(pos + 1), float("-inf"))
        o = (att.softmax(-1) @ vc[i][:, :, :pos + T]).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(o, b["pw"], b["pb"])
        h = F.layer_norm(x, (C,), b["ln2w"], b["ln2b"])
        x = x + F.linear(F.gelu(F.linear(h, b["fw"], b["fb"]), approximate="tanh"), b["qw"], b["qb"])
    return F.layer_norm(x[:, -1:], (C,), lnfw, lnfb) @ wte.t()
def generate(prompt, n):
    T0 = prompt.shape[1]
    kc = [torch.zeros(1, H, T0 + n, D) for _ in range(L)]
    vc = [torch.zeros(1, H, T0 + n, D) for _ in range(L)]
    with torch.no_grad():
        logits, out, pos = forward(prompt, kc, vc, 0), [prompt], T0
        for s in range(n):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            out.append(nxt)
            if s < n - 1:
                logits = forward(nxt, kc, vc, pos)
                pos += 1
    return torch.cat(out, 1)
prompt = torch.randint(0, V, (1, %d))]], V, C, L, NH, PROMPT)

-- GPT-2 124M in torch modules (pre-LN blocks, tanh GELU, tied head), a training step's setup.
local TRAIN_B, TRAIN_T = 4, 64
local TORCH_TRAIN_SETUP = string.format([[
import math
nn, F = torch.nn, torch.nn.functional
V, C, L, H, B, T = 50257, 768, 12, 12, %d, %d
class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.attn, s.proj = nn.LayerNorm(C), nn.Linear(C, 3 * C), nn.Linear(C, C)
        s.ln2, s.fc, s.out = nn.LayerNorm(C), nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
    def forward(s, x):
        b, t, _ = x.shape
        q, k, v = (z.transpose(1, 2) for z in s.attn(s.ln1(x)).view(b, t, 3, H, C // H).unbind(2))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True) if hasattr(F, "scaled_dot_product_attention") \
            else (((q @ k.transpose(-1, -2)) / math.sqrt(C // H)).masked_fill(
                torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf")).softmax(-1) @ v)
        x = x + s.proj(o.transpose(1, 2).reshape(b, t, C))
        return x + s.out(F.gelu(s.fc(s.ln2(x)), approximate="tanh"))
class GPT(nn.Module):
    def __init__(s):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(V, C), nn.Embedding(1024, C)
        s.h, s.lnf = nn.ModuleList([Block() for _ in range(L)]), nn.LayerNorm(C)
    def forward(s, ids):
        x = s.wte(ids) + s.wpe(torch.arange(ids.shape[1]))
        for blk in s.h: x = blk(x)
        return s.lnf(x) @ s.wte.weight.t()
model = GPT()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
def step():
    loss = F.cross_entropy(model(x).view(-1, V), y.view(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()]], TRAIN_B, TRAIN_T)

return function(ctx)
  local dle = ctx.dle
  local vs_torch = require("bench.vs_torch")
  return {vs_torch("train_gpt2_124m",
    string.format("training step: GPT-2 124M, batch %dx%d, AdamW", TRAIN_B, TRAIN_T), 0.9, nil, function()
      local m = dle.models.gpt2.GPT2({vocab_size = V, n_positions = 1024, n_embd = 768, n_layer = 12, n_head = 12},
        {generator = dle.Generator(0)})
      local opt = dle.optim.AdamW(m:parameters(), {lr = 1e-4})
      local x = dle.randint(0, V, {TRAIN_B, TRAIN_T}, {generator = dle.Generator(1)}):long()
      local y = dle.randint(1, V + 1, {TRAIN_B * TRAIN_T}, {generator = dle.Generator(2)}):long()
      return function()
        local loss = dle.nn.functional.cross_entropy(m(x):view(-1, V), y)
        opt:zero_grad()
        loss:backward()
        opt:step()
        return loss:item()
      end
    end, TORCH_TRAIN_SETUP, "step()"), {
    key = "gpt2_decode",
    name = string.format("GPT-2 greedy decoding, KV cache, %d layers width %d, %d+%d tokens", L, C, PROMPT, NEW),
    unit = "tokens/s", work = NEW, target = {ref = "PyTorch", min = 1.2},
    dle = function()
      local m = dle.models.gpt2.GPT2({vocab_size = V, n_positions = 1024, n_embd = C, n_layer = L, n_head = NH},
        {generator = dle.Generator(0)})
      m:eval()
      local prompt = dle.randint(0, V, {1, PROMPT}, {generator = dle.Generator(1)}):long()
      return function() m:generate(prompt, {max_new_tokens = NEW, temperature = 0}) end
    end,
    refs = {{kind = "torch", label = "PyTorch", setup = TORCH_SETUP,
             body = string.format("generate(prompt, %d)", NEW)}},
  }}
end
