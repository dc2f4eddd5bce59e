--- What the Fashion-MNIST examples share: standardized data, the training loop (with a cosine
-- schedule with warmup), test accuracy and the per-epoch report. Loaded with dofile by mlp.lua
-- and cnn.lua, which only define their model and optimizer.
local dle = require("dle")

local common = {}

--- train_x, train_y, test_x, test_y with pixels standardized by the training set's mean and
-- standard deviation (trains faster than [0,1]); images keep their N x 1 x 28 x 28 shape.
-- DLE_EXAMPLE_LIMIT=n keeps the first n images of each split (the test suite's smoke runs).
function common.load()
  local train_x, train_y = dle.data.fashion_mnist("train")
  local test_x, test_y = dle.data.fashion_mnist("test")
  local limit = math.tointeger(tonumber(os.getenv("DLE_EXAMPLE_LIMIT") or ""))
  if limit and limit > 0 then   -- copies, so the full splits' storage is freed
    local function first(t) return t:narrow(1, 1, math.min(limit, t:size(1))):clone() end
    train_x, train_y, test_x, test_y = first(train_x), first(train_y), first(test_x), first(test_y)
  end
  local mean, std = train_x:mean():item(), train_x:std():item()
  -- in place: the training images are 188 MB, and fresh memory costs its page faults
  return train_x:sub_(mean):div_(std), train_y, test_x:sub_(mean):div_(std), test_y
end

--- x {N, C, H, W} mirrored left-right.
function common.flip(x)
  return x:index_select(4, dle.arange(x:size(4), 0, -1):long())
end

--- x with each sample mirrored left-right with probability 1/2 (clothes stay clothes).
function common.random_flip(x, generator)
  local m = dle.rand({x:size(1), 1, 1, 1}, {generator = generator}):lt(0.5)
  return dle.where(m, common.flip(x), x)
end

--- Fraction of correctly classified samples of (x, y), in batches, in eval mode, unrecorded;
-- with tta, the logits are averaged over each image and its mirror image.
function common.accuracy(model, x, y, tta)
  model:eval()
  local correct = 0
  dle.no_grad(function()
    for b = 1, x:size(1), 500 do
      local n = math.min(500, x:size(1) - b + 1)
      local xb = x:narrow(1, b, n)
      local logits = model(xb)
      if tta then logits = logits + model(common.flip(xb)) end
      local pred = logits:argmax(2)
      correct = correct + pred:eq(y:narrow(1, b, n)):sum():item()
    end
  end)
  model:train()
  return correct / x:size(1)
end

--- Trains `model` with `opt` for opts.epochs epochs of opts.batch_size (shuffled with a seeded
-- generator), the learning rate following a cosine schedule with opts.warmup warmup steps
-- (default 100, at most a tenth of the run), cross-entropy with opts.label_smoothing (default 0); with opts.flip,
-- random left-right flips of the training images and test accuracy averaged over each image and its mirror image.
-- Shows a progress bar per epoch (dle.progress) and prints loss, test accuracy, samples/s and
-- seconds per epoch; with opts.name, logs every step and epoch to <log_dir>/<name>.jsonl (dle.log;
-- opts.log_dir, default "runs") and draws <log_dir>/<name>.svg of the curves at the end (dle.plot).
-- Returns the last test accuracy.
function common.fit(model, opt, data, opts)
  local train_x, train_y, test_x, test_y = table.unpack(data)
  local steps = opts.epochs * math.ceil(train_x:size(1) / opts.batch_size)
  -- 100 warmup steps (a tenth of the run when that is shorter, as in the test suite's short runs)
  local warmup = opts.warmup or math.min(100, steps // 10)
  local schedule = dle.optim.lr.cosine(opt, {warmup = warmup, total = steps, min_lr = 1e-5})
  local loss_fn = dle.nn.CrossEntropyLoss({label_smoothing = opts.label_smoothing or 0})
  local loader = dle.data.DataLoader({train_x, train_y},
                                     {batch_size = opts.batch_size, shuffle = true, generator = dle.Generator(0)})
  local acc, flip_gen = nil, dle.Generator(1)
  -- with opts.ema (a decay such as 0.999), test accuracy is that of an exponential moving average
  -- of the weights over the steps (Polyak averaging), kept beside the trained ones
  local params, ema = model:parameters(), nil
  if opts.ema then
    ema = {}
    for i, p in ipairs(params) do ema[i] = p:detach():clone() end
  end
  local function swap_ema()
    dle.no_grad(function()
      for i, p in ipairs(params) do
        local t = p:detach():clone()
        p:copy_(ema[i])
        ema[i] = t
      end
    end)
  end
  local log, step
  local run_path = opts.name and (opts.log_dir or "runs") .. "/" .. opts.name
  if run_path then
    os.execute("mkdir -p '" .. (opts.log_dir or "runs"):gsub("'", "'\\''") .. "'")
    log, step = dle.log.open(run_path .. ".jsonl", {truncate = true}), 0
  end
  for epoch = 1, opts.epochs do
    local t0, total, seen = dle.time(), 0, 0
    local bar = dle.progress(loader, {desc = "epoch " .. epoch})
    for x, y in bar do
      if opts.flip then x = common.random_flip(x, flip_gen) end
      local loss = loss_fn(model(x), y)
      opt:zero_grad()
      loss:backward()
      opt:step()
      schedule:step()
      if ema then
        dle.no_grad(function()
          for i, p in ipairs(params) do ema[i]:mul_(opts.ema):add_(p:detach() * (1 - opts.ema)) end
        end)
      end
      local l = loss:item()
      total = total + l * x:size(1)
      seen = seen + x:size(1)
      bar:set{loss = l}
      if log then
        step = step + 1
        log:write{step = step, loss = l, lr = opt.lr}
      end
    end
    local dt = dle.time() - t0
    if ema then swap_ema() end
    acc = common.accuracy(model, test_x, test_y, opts.flip)
    if ema then swap_ema() end
    print(string.format("epoch %d  loss %.4f  test accuracy %.4f  %.0f samples/s  (%.1f s)",
                        epoch, total / seen, acc, seen / dt, dt))
    if log then log:write{step = step, epoch = epoch, epoch_loss = total / seen, test_accuracy = acc} end
  end
  if log then
    log:close()
    dle.plot.from_log(run_path .. ".jsonl", run_path .. ".svg", {"loss", "epoch_loss", "test_accuracy"},
                      {title = opts.name})
    print("curves: " .. run_path .. ".svg (log: " .. run_path .. ".jsonl)")
  end
  return acc
end

return common
