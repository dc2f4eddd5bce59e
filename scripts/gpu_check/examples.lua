--- scripts/gpu-check's training steps: the model, loss and optimizer of each example (examples/*),
-- one step on a random batch of its data's shape (the datasets are not needed), on the device and on
-- the reference device from the same initial weights; the loss, every gradient and every parameter
-- after the optimizer's step are compared (normalized error, as the ops'). examples/fashion_mnist/
-- ddp.lua's step runs under DistributedDataParallel in a world of one process (its all-reduce on the
-- device: NCCL on a GPU), when dle.dist is available.
local dle = require("dle")
local compare = require("gpu_check.compare")

local M = {}

-- Flagged beyond (float32): an optimizer step divides by gradient norms, so a few roundings in a
-- small gradient move a parameter further than in one op.
M.TOL = 1e-3

local function root_of() return (debug.getinfo(1, "S").source:match("^@(.*)/scripts/gpu_check/") or ".") .. "/" end

-- Each example: build() -> model, a function making its optimizer, batch(gen) -> inputs (CPU), and
-- loss(model, inputs) -> the loss.
local function examples(root)
  local fm = dofile(root .. "examples/fashion_mnist/models.lua")
  local GPT = dofile(root .. "examples/char_gpt/model.lua")
  local F = dle.nn.functional
  local function classes(gen, n, k) return dle.randint(1, k + 1, {n}, {dtype = "int64", generator = gen}) end
  local function lm_loss(logits, y) return F.cross_entropy(logits:reshape(-1, logits:size(3)), y:reshape(-1)) end
  local function adamw(m) return dle.optim.AdamW(m:parameters(), {lr = 3e-3, weight_decay = 0.1}) end
  -- token ids are 0-based values for the language models, their targets 1-based classes
  local function lm_batch(gen)
    local ids = dle.randint(0, 256, {2, 17}, {dtype = "int64", generator = gen})
    return {ids:narrow(2, 1, 16):contiguous(), ids:narrow(2, 2, 16):add(1):contiguous()}
  end
  local tiny_lm = {vocab_size = 256, n_positions = 64, n_embd = 64, n_layer = 2, n_head = 4}
  return {
    {name = "fashion_mnist/mlp.lua", build = fm.mlp,
     optim = function(m) return dle.optim.Adam(m:parameters(), {lr = 2e-3}) end,
     batch = function(gen) return {dle.randn({64, 784}, {generator = gen}), classes(gen, 64, 10)} end,
     loss = function(m, b) return F.cross_entropy(m(b[1]), b[2]) end},
    {name = "fashion_mnist/cnn.lua", build = function() return fm.cnn() end,
     optim = function(m) return dle.optim.AdamW(m:parameters(), {lr = 2e-3, weight_decay = 1e-4}) end,
     batch = function(gen) return {dle.randn({16, 1, 28, 28}, {generator = gen}), classes(gen, 16, 10)} end,
     loss = function(m, b) return F.cross_entropy(m(b[1]), b[2], {label_smoothing = 0.1}) end},
    {name = "char_gpt/train.lua", build = function()
       return GPT({vocab = 65, context = 32, d = 32, heads = 2, layers = 2})
     end, optim = adamw, clip = 1.0,
     batch = function(gen)
       local ids = dle.randint(1, 66, {4, 33}, {dtype = "int64", generator = gen})   -- class numbers, 1-based
       return {ids:narrow(2, 1, 32):contiguous(), ids:narrow(2, 2, 32):contiguous()}
     end,
     loss = function(m, b) return lm_loss(m(b[1]), b[2]) end},
    {name = "llm (gpt2, random_checkpoint.lua tiny)", build = function()
       return dle.models.gpt2.GPT2(tiny_lm, {generator = dle.Generator(1)})
     end, optim = adamw,
     batch = function(gen)
       return lm_batch(gen)
     end,
     loss = function(m, b) return lm_loss(m(b[1]), b[2]) end},
    {name = "llm (llama, random_checkpoint.lua tiny)", build = function()
       return dle.models.llama.Llama({vocab_size = 256, hidden_size = 64, intermediate_size = 170,
         num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2, max_position_embeddings = 64,
         tie_word_embeddings = true}, {generator = dle.Generator(1)})
     end, optim = adamw,
     batch = function(gen)
       return lm_batch(gen)
     end,
     loss = function(m, b) return lm_loss(m(b[1]), b[2]) end},
    {name = "fashion_mnist/ddp.lua (DistributedDataParallel, 1 rank)", dist = true, build = fm.mlp,
     optim = function(m) return dle.optim.Adam(m:parameters(), {lr = 2e-3}) end,
     batch = function(gen) return {dle.randn({32, 784}, {generator = gen}), classes(gen, 32, 10)} end,
     loss = function(m, b) return F.cross_entropy(m(b[1]), b[2]) end},
  }
end

-- One step of example ex on device: the loss, the gradients and the parameters after the step.
local function step(ex, device)
  dle.manual_seed(0)
  local model = ex.build():to(device)
  if ex.dist then model = dle.dist.DistributedDataParallel(model) end
  local opt = ex.optim(model)
  local batch = ex.batch(dle.Generator(2))
  for i, t in ipairs(batch) do batch[i] = t:to(device) end
  local loss = ex.loss(model, batch)
  opt:zero_grad()
  loss:backward()
  local params, out = model:parameters(), {loss:detach()}
  for _, p in ipairs(params) do out[#out + 1] = p.grad and p.grad:clone() or dle.zeros_like(p) end
  if ex.clip then dle.nn.utils.clip_grad_norm_(params, ex.clip) end
  opt:step()
  for _, p in ipairs(params) do out[#out + 1] = p:detach():clone() end
  return out
end

--- M.run(opts) -> a list of {name, status = "ok" | "FLAGGED" | "FAILED" | "skipped", error, message}:
-- each example's step on opts.device against opts.reference (default "cpu"); opts.alter(name,
-- outputs) -> outputs is applied to the device's (the tests' perturbation).
function M.run(opts)
  local results = {}
  for _, ex in ipairs(examples(opts.root or root_of())) do
    local r = {name = ex.name, error = 0, status = "ok"}
    local available, why = true, nil
    if ex.dist then
      available, why = dle.dist.is_available()
      if available then dle.dist.init() end
    end
    if not available then
      r.status, r.message = "skipped", why
    else
      local okr, want = pcall(step, ex, opts.reference or "cpu")
      local okd, got = pcall(step, ex, opts.device)
      if not okr then
        r.status, r.message = "FAILED", "on the reference device: " .. tostring(want)
      elseif not okd then
        r.status, r.message = "FAILED", tostring(got)
      else
        if opts.alter then got = opts.alter(ex.name, got) end
        local e, _, msg = compare.compare(got, want)
        r.error, r.message = e, "loss " .. string.format("%.5f", want[1]:item()) .. ", " .. (#want - 1) // 2
          .. " parameter tensors; worst: " .. tostring(msg)
        if e > M.TOL then r.status = "FLAGGED" end
      end
    end
    results[#results + 1] = r
  end
  return results
end

--- M.report(results, write) -> the number flagged or failed, after a line per example.
function M.report(results, write)
  write = write or io.write
  local bad = 0
  for _, r in ipairs(results) do
    if r.status == "FLAGGED" or r.status == "FAILED" then bad = bad + 1 end
    write(string.format("%-56s %-8s %11.3e  %s\n", r.name, r.status, r.error, r.message or ""))
  end
  write(string.format("training steps: %d examples, %d flagged or failed (tolerance %g)\n", #results, bad, M.TOL))
  return bad
end

return M
