--- Fashion-MNIST with a multilayer perceptron (784-256-128-10, ReLU), trained with Adam and a
-- cosine learning-rate schedule with warmup. The dataset's own benchmark table lists an MLP
-- 256-128-100 at 0.8833 test accuracy; this one reached 0.887 after 5 epochs (seed 0).
-- Prints loss, test accuracy and throughput per epoch.
--   scripts/dle examples/fashion_mnist/mlp.lua [epochs] [batch_size] [peak_lr]
local dle = require "dle"
local nn = dle.nn

local epochs = tonumber(arg and arg[1]) or 5
local batch_size = tonumber(arg and arg[2]) or 128
local lr = tonumber(arg and arg[3]) or 2e-3
dle.manual_seed(0)

local train_x, train_y = dle.data.fashion_mnist("train")
local test_x, test_y = dle.data.fashion_mnist("test")
-- standardized pixels (the training set's mean and standard deviation) train faster than [0,1]
local mean, std = train_x:mean():item(), train_x:std():item()
train_x, test_x = ((train_x - mean) / std):view(-1, 784), ((test_x - mean) / std):view(-1, 784)

local model = nn.Sequential(
  nn.Linear(784, 256), nn.ReLU(),
  nn.Linear(256, 128), nn.ReLU(),
  nn.Linear(128, 10))
model:summary({batch_size, 784})

local opt = dle.optim.Adam(model:parameters(), {lr = lr})
local steps_per_epoch = math.ceil(train_x:size(1) / batch_size)
local schedule = dle.optim.lr.cosine(opt, {warmup = 100, total = epochs * steps_per_epoch, min_lr = 1e-5})
local loss_fn = nn.CrossEntropyLoss()
local loader = dle.data.DataLoader({train_x, train_y},
                                   {batch_size = batch_size, shuffle = true, generator = dle.Generator(0)})

--- Fraction of correctly classified samples of (x, y), in batches, without recording.
local function accuracy(x, y)
  model:eval()
  local correct = 0
  dle.no_grad(function()
    for b = 1, x:size(1), 1000 do
      local n = math.min(1000, x:size(1) - b + 1)
      local pred = model(x:narrow(1, b, n)):argmax(2)
      correct = correct + pred:eq(y:narrow(1, b, n)):sum():item()
    end
  end)
  model:train()
  return correct / x:size(1)
end

for epoch = 1, epochs do
  local t0, total, seen = dle.time(), 0, 0
  for x, y in loader do
    local loss = loss_fn(model(x), y)
    opt:zero_grad()
    loss:backward()
    opt:step()
    schedule:step()
    total = total + loss:item() * x:size(1)
    seen = seen + x:size(1)
  end
  local dt = dle.time() - t0
  print(string.format("epoch %d  loss %.4f  test accuracy %.4f  %.0f samples/s",
                      epoch, total / seen, accuracy(test_x, test_y), seen / dt))
end
