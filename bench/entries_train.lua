--- bench/entries_train.lua — one training step (forward, loss, zero_grad, backward, optimizer
-- step, loss:item()) of the example models on random data of the right shapes, the same model,
-- batch and thread count on both sides, in ms per step vs PyTorch:
--   MLP       examples/fashion_mnist/mlp.lua: 784-256-128-10 ReLU, Adam, batch 128 (plus the
--             projected epoch: 469 steps of 60,000 images)
--   CNN       examples/fashion_mnist/cnn.lua: 2 x (Conv 3x3 - BN - ReLU - MaxPool) - Linear 128 - BN -
--             Linear 10, AdamW, batch 128 (the example trains at batch 16)
--   char-GPT  examples/char_gpt/train.lua: 4 pre-LN blocks, d 128, 4 heads, context 128, vocab 63
--             (the KJV corpus), batch 32, AdamW (decay on matrices only), grad norm clipped at 1
-- dle's side builds the examples' own models (examples/*/model(s).lua); PyTorch's side is the same
-- architecture written for torch.
return function(ctx)
  local dle = ctx.dle
  local nn = dle.nn
  local F = nn.functional
  local entries = {}
  local models = dofile(ctx.root .. "/examples/fashion_mnist/models.lua")
  local GPT = dofile(ctx.root .. "/examples/char_gpt/model.lua")

  -- A training step closure; loss_of(model) computes the loss on the fixed batch. compiled: the
  -- step but loss:item() as one dle.compile'd graph (forward, backward, clipping, optimizer step).
  local function step(model, opt, loss_of, after_backward, compiled)
    local function train()
      local loss = loss_of(model)
      opt:zero_grad()
      loss:backward()
      if after_backward then after_backward() end
      opt:step()
      return loss
    end
    if compiled then train = dle.compile(train) end
    return function() return train():item() end
  end

  -- shared torch code: a training step on a fixed batch
  local torch_step = [[
loss = loss_fn(model(x), y)
opt.zero_grad()
loss.backward()
opt.step()
loss.item()]]

  local function mlp_step(compiled)
    local model = models.mlp()
    local opt = dle.optim.Adam(model:parameters(), {lr = 2e-3})
    local x, y = dle.randn(128, 784), dle.randint(1, 11, {128}, {dtype = "int64"})
    local loss_fn = nn.CrossEntropyLoss()
    return step(model, opt, function(m) return loss_fn(m(x), y) end, nil, compiled)
  end
  local mlp_torch = {kind = "torch", label = "PyTorch", setup = [[
nn = torch.nn
model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
x, y = torch.randn(128, 784), torch.randint(0, 10, (128,))
loss_fn = nn.CrossEntropyLoss()]], body = torch_step}

  entries[#entries + 1] = {
    key = "train_mlp",
    name = "training step: Fashion-MNIST MLP, batch 128",
    unit = "ms", scale = 1e3, epoch_steps = 469, target = {ref = "PyTorch", max = 0.7},
    dle = function() return mlp_step(false) end,
    refs = {mlp_torch},
  }
  -- issue 21 point 3: the whole step as one replayed graph, next to eager dle and PyTorch
  entries[#entries + 1] = {
    key = "train_mlp_compiled",
    name = "training step compiled: Fashion-MNIST MLP, batch 128",
    unit = "ms", scale = 1e3, epoch_steps = 469, target = {ref = "PyTorch", max = 0.7},
    dle = function() return mlp_step(true) end,
    refs = {{kind = "lua", label = "dle eager", fn = function() return mlp_step(false) end}, mlp_torch},
  }

  entries[#entries + 1] = {
    key = "train_cnn",
    name = "training step: Fashion-MNIST CNN, batch 128",
    unit = "ms", scale = 1e3, target = {ref = "PyTorch", max = 1.0}, epoch_steps = 469,
    dle = function()
      local model = models.cnn()
      local opt = dle.optim.AdamW(model:parameters(), {lr = 2e-3, weight_decay = 1e-4})
      local x, y = dle.randn(128, 1, 28, 28), dle.randint(1, 11, {128}, {dtype = "int64"})
      local loss_fn = nn.CrossEntropyLoss()
      return step(model, opt, function(m) return loss_fn(m(x), y) end)
    end,
    refs = {{kind = "torch", label = "PyTorch", setup = [[
nn = torch.nn
model = nn.Sequential(
    nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(),
    nn.Linear(64 * 7 * 7, 128), nn.BatchNorm1d(128), nn.ReLU(),
    nn.Linear(128, 10))
opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
x, y = torch.randn(128, 1, 28, 28), torch.randint(0, 10, (128,))
loss_fn = nn.CrossEntropyLoss()]], body = torch_step}},
  }

  -- char-GPT (examples/char_gpt/model.lua), the KJV corpus's vocabulary of 63 characters
  local V, B, T, D, H, L = 63, 32, 128, 128, 4, 4

  local function gpt_step(compiled)
    local model = GPT({vocab = V, context = T, d = D, heads = H, layers = L})
    local decay, no_decay = {}, {}
    for _, p in ipairs(model:parameters()) do
      if p:dim() >= 2 then decay[#decay + 1] = p else no_decay[#no_decay + 1] = p end
    end
    local opt = dle.optim.AdamW({{params = decay, weight_decay = 0.1}, {params = no_decay, weight_decay = 0}},
      {lr = 3e-3, betas = {0.9, 0.95}})
    local x = dle.randint(1, V + 1, {B, T}, {dtype = "int64"})
    local y = dle.randint(1, V + 1, {B * T}, {dtype = "int64"})
    local params = model:parameters()
    return step(model, opt, function(m) return F.cross_entropy(m(x):view(B * T, V), y) end,
      function() nn.utils.clip_grad_norm_(params, 1.0) end, compiled)
  end
  local gpt_torch = {kind = "torch", label = "PyTorch", setup = string.format([[
import math
nn, F = torch.nn, torch.nn.functional
V, B, T, D, H, L = %d, %d, %d, %d, %d, %d

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1))

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (t.reshape(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        att = (q * (1 / math.sqrt(D // H))) @ k.transpose(-2, -1)
        att = att.masked_fill(self.mask, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, D))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        self.blocks = nn.ModuleList([Block() for _ in range(L)])
        self.ln_f, self.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)
        self.register_buffer("pos", torch.arange(T))

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(self.pos)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))

model = GPT()
decay = [p for p in model.parameters() if p.dim() >= 2]
no_decay = [p for p in model.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=3e-3, betas=(0.9, 0.95))
x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B * T,))]], V, B, T, D, H, L), body = [[
loss = F.cross_entropy(model(x).view(B * T, V), y)
opt.zero_grad()
loss.backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
opt.step()
loss.item()]]}

  entries[#entries + 1] = {
    key = "train_gpt",
    name = string.format("training step: char-GPT %d layers d %d, batch %dx%d", L, D, B, T),
    -- near its bound: alternate the sides
    unit = "ms", scale = 1e3, target = {ref = "PyTorch", max = 0.8}, rounds = 3,
    dle = function() return gpt_step(false) end,
    refs = {gpt_torch},
  }
  entries[#entries + 1] = {
    key = "train_gpt_compiled",
    name = string.format("training step compiled: char-GPT %d layers d %d, batch %dx%d", L, D, B, T),
    unit = "ms", scale = 1e3, target = {ref = "PyTorch", max = 0.75}, rounds = 3,
    dle = function() return gpt_step(true) end,
    refs = {{kind = "lua", label = "dle eager", fn = function() return gpt_step(false) end}, gpt_torch},
  }
  return entries
end
